/**
 * Packet I/O ports: the {@link io.netreduce.protocol.port.PacketPort} contract, the AF_PACKET implementation
 * over PACKET_MMAP rings ({@link io.netreduce.protocol.port.AfPacketPort}, configured by
 * {@link io.netreduce.protocol.port.AfPacketConfiguration}, receive ring layout chosen by
 * {@link io.netreduce.protocol.port.RxRingVersion}), the AF_XDP implementation with its own XDP program
 * ({@link io.netreduce.protocol.port.AfXdpPort}, configured by {@link io.netreduce.protocol.port.AfXdpConfiguration};
 * the program is {@code XdpRedirectProgram}, loaded and attached by {@code Bpf}), an in-memory port for tests
 * ({@link io.netreduce.protocol.port.MemoryPort}), per-port {@link io.netreduce.protocol.port.PortCounters}, and
 * {@link io.netreduce.protocol.port.NetworkNamespace} for opening ports in another network namespace from tests
 * and tools.
 * <p>
 * Native calls go through the FFM API ({@code Libc}); kernel constants and struct offsets live in
 * {@code LinuxPacketAbi} (AF_PACKET) and {@code XdpAbi} (AF_XDP, bpf). The JVM needs {@code --enable-native-access=ALL-UNNAMED} (in netreduce.jvm.flags).
 */
package io.netreduce.protocol.port;
