package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static io.netreduce.protocol.port.XdpAbi.*;

/**
 * The few bpf(2) commands an {@link AfXdpPort} needs, as raw system calls through {@link Libc#syscall}: create an
 * XSKMAP, put a socket in it, load the {@link XdpRedirectProgram} and attach it to an interface with a BPF link.
 * Open-time only; each call builds its {@code union bpf_attr} in a scratch arena. Failures throw
 * {@link PortException} naming the command and errno (and, for a refused program, the verifier's log).
 */
final class Bpf
{
    /** Verifier log kept when a load fails: plenty for a six-instruction program. */
    private static final int VERIFIER_LOG_SIZE = 64 * 1024;

    private Bpf()
    {
    }

    /**
     * @return the descriptor of a new XSKMAP of {@code entries} queue slots.
     */
    static int createXskMap(final MemorySegment errnoState, final int entries, final String name)
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment attr = scratch.allocate(BPF_ATTR_SIZE, 8);
            attr.set(ValueLayout.JAVA_INT, MAP_CREATE_MAP_TYPE_OFFSET, BPF_MAP_TYPE_XSKMAP);
            attr.set(ValueLayout.JAVA_INT, MAP_CREATE_KEY_SIZE_OFFSET, Integer.BYTES);
            attr.set(ValueLayout.JAVA_INT, MAP_CREATE_VALUE_SIZE_OFFSET, Integer.BYTES);
            attr.set(ValueLayout.JAVA_INT, MAP_CREATE_MAX_ENTRIES_OFFSET, entries);
            attr.setString(MAP_CREATE_MAP_NAME_OFFSET, "xsks_map");
            return (int)call(errnoState, BPF_MAP_CREATE, attr, "BPF_MAP_CREATE XSKMAP for '" + name + "'");
        }
    }

    /**
     * xsks_map[queue] = socketFd.
     */
    static void putSocket(final MemorySegment errnoState, final int mapFd, final int queue, final int socketFd)
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment key = scratch.allocate(ValueLayout.JAVA_INT);
            key.set(ValueLayout.JAVA_INT, 0, queue);
            final MemorySegment value = scratch.allocate(ValueLayout.JAVA_INT);
            value.set(ValueLayout.JAVA_INT, 0, socketFd);
            final MemorySegment attr = scratch.allocate(BPF_ATTR_SIZE, 8);
            attr.set(ValueLayout.JAVA_INT, MAP_ELEM_MAP_FD_OFFSET, mapFd);
            attr.set(ValueLayout.JAVA_LONG, MAP_ELEM_KEY_OFFSET, key.address());
            attr.set(ValueLayout.JAVA_LONG, MAP_ELEM_VALUE_OFFSET, value.address());
            call(errnoState, BPF_MAP_UPDATE_ELEM, attr, "BPF_MAP_UPDATE_ELEM xsks_map[" + queue + "]");
        }
    }

    /**
     * Load the {@link XdpRedirectProgram} over {@code mapFd}, frags-aware.
     *
     * @return the program's descriptor.
     * @throws PortException with the verifier's log if the kernel refuses it.
     */
    static int loadRedirectProgram(final MemorySegment errnoState, final int mapFd, final String name)
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final byte[] code = XdpRedirectProgram.instructions(mapFd);
            final MemorySegment instructions = scratch.allocate(code.length, 8);
            MemorySegment.copy(code, 0, instructions, ValueLayout.JAVA_BYTE, 0, code.length);
            final MemorySegment license = scratch.allocateFrom(XdpRedirectProgram.LICENSE);
            final MemorySegment log = scratch.allocate(VERIFIER_LOG_SIZE);
            final MemorySegment attr = scratch.allocate(BPF_ATTR_SIZE, 8);
            attr.set(ValueLayout.JAVA_INT, PROG_LOAD_PROG_TYPE_OFFSET, BPF_PROG_TYPE_XDP);
            attr.set(ValueLayout.JAVA_INT, PROG_LOAD_INSN_CNT_OFFSET, code.length / XdpRedirectProgram.INSTRUCTION_SIZE);
            attr.set(ValueLayout.JAVA_LONG, PROG_LOAD_INSNS_OFFSET, instructions.address());
            attr.set(ValueLayout.JAVA_LONG, PROG_LOAD_LICENSE_OFFSET, license.address());
            attr.set(ValueLayout.JAVA_INT, PROG_LOAD_LOG_LEVEL_OFFSET, 1);
            attr.set(ValueLayout.JAVA_INT, PROG_LOAD_LOG_SIZE_OFFSET, VERIFIER_LOG_SIZE);
            attr.set(ValueLayout.JAVA_LONG, PROG_LOAD_LOG_BUF_OFFSET, log.address());
            attr.set(ValueLayout.JAVA_INT, PROG_LOAD_PROG_FLAGS_OFFSET, BPF_F_XDP_HAS_FRAGS);
            attr.setString(PROG_LOAD_PROG_NAME_OFFSET, XdpRedirectProgram.NAME);
            attr.set(ValueLayout.JAVA_INT, PROG_LOAD_EXPECTED_ATTACH_TYPE_OFFSET, BPF_XDP);
            final long fd = Libc.syscall(errnoState, SYS_BPF, BPF_PROG_LOAD, attr.address(), BPF_ATTR_SIZE);
            if (fd < 0)
            {
                final int errno = Libc.errno(errnoState);
                final String verifierLog = log.getString(0).strip();
                throw new PortException("BPF_PROG_LOAD of the XDP program for '" + name + "' (needs CAP_BPF and " +
                    "CAP_NET_ADMIN)" + (verifierLog.isEmpty() ? "" : "; verifier log:\n" + verifierLog), errno);
            }
            return (int)fd;
        }
    }

    /**
     * Attach {@code programFd} to the XDP hook of {@code ifIndex} through a BPF link: the program stays attached
     * as long as the link's descriptor is open, so closing it (or the process ending) detaches it.
     *
     * @param xdpFlags {@link XdpAbi#XDP_FLAGS_DRV_MODE} or {@link XdpAbi#XDP_FLAGS_SKB_MODE}.
     * @return the link's descriptor, or -errno if the kernel refused (the caller may try another mode).
     */
    static int tryLinkXdp(final MemorySegment errnoState, final int programFd, final int ifIndex, final int xdpFlags)
    {
        try (Arena scratch = Arena.ofConfined())
        {
            final MemorySegment attr = scratch.allocate(BPF_ATTR_SIZE, 8);
            attr.set(ValueLayout.JAVA_INT, LINK_CREATE_PROG_FD_OFFSET, programFd);
            attr.set(ValueLayout.JAVA_INT, LINK_CREATE_TARGET_IFINDEX_OFFSET, ifIndex);
            attr.set(ValueLayout.JAVA_INT, LINK_CREATE_ATTACH_TYPE_OFFSET, BPF_XDP);
            attr.set(ValueLayout.JAVA_INT, LINK_CREATE_FLAGS_OFFSET, xdpFlags);
            final long fd = Libc.syscall(errnoState, SYS_BPF, BPF_LINK_CREATE, attr.address(), BPF_ATTR_SIZE);
            return fd < 0 ? -Libc.errno(errnoState) : (int)fd;
        }
    }

    private static long call(final MemorySegment errnoState, final int command, final MemorySegment attr, final String what)
    {
        final long result = Libc.syscall(errnoState, SYS_BPF, command, attr.address(), BPF_ATTR_SIZE);
        if (result < 0)
        {
            throw new PortException(what + " (needs CAP_BPF)", Libc.errno(errnoState));
        }
        return result;
    }
}
