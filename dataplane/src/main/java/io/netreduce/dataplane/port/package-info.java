/**
 * Packet I/O ports: the {@link io.netreduce.dataplane.port.PacketPort} contract, the AF_PACKET implementation
 * over PACKET_MMAP rings ({@link io.netreduce.dataplane.port.AfPacketPort}, configured by
 * {@link io.netreduce.dataplane.port.AfPacketConfiguration}, receive ring layout chosen by
 * {@link io.netreduce.dataplane.port.RxRingVersion}), an in-memory port for tests
 * ({@link io.netreduce.dataplane.port.MemoryPort}), per-port {@link io.netreduce.dataplane.port.PortCounters}, and
 * {@link io.netreduce.dataplane.port.NetworkNamespace} for opening ports in another network namespace from tests
 * and tools.
 * <p>
 * Native calls go through the FFM API ({@code Libc}); kernel constants and struct offsets live in
 * {@code LinuxPacketAbi}. The JVM needs {@code --enable-native-access=ALL-UNNAMED} (in netreduce.jvm.flags).
 */
package io.netreduce.dataplane.port;
