package io.netreduce.protocol.port;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Test oracle: runs a {@link ClassicBpfProgram} as the kernel runs it, for the instructions netreduce emits
 * (absolute word, half-word and byte loads, half-word and word loads indexed by X, the IPv4 header length into X, the
 * protocol and flow-hash ancillary loads, and #k, jeq #k, jgt #k, jge #k, ja, ret #k, ret a). As in the kernel, an
 * 802.1Q tag is already taken off into the metadata, and a load past the end ends the program with 0. A fanout
 * classifier sees the frame from its network header on ({@link #run}); a packet socket's filter from its Ethernet
 * header ({@link #runSocketFilter}).
 */
final class ClassicBpfInterpreter
{
    private ClassicBpfInterpreter()
    {
    }

    /**
     * As a fanout classifier.
     *
     * @param frame    the frame from its Ethernet header.
     * @param flowHash what the flow-hash load returns.
     */
    static int run(final ClassicBpfProgram program, final byte[] frame, final int flowHash)
    {
        final int tag = tagLength(frame);
        return execute(program, Arrays.copyOfRange(frame, 14 + tag, frame.length), protocol(frame), flowHash);
    }

    /**
     * As a SOCK_RAW packet socket's filter: its return value is the number of bytes kept, 0 for none.
     *
     * @param frame the frame from its Ethernet header, as sent (a tag in it is taken off first).
     */
    static int runSocketFilter(final ClassicBpfProgram program, final byte[] frame)
    {
        final int tag = tagLength(frame);
        final byte[] untagged = new byte[frame.length - tag];
        System.arraycopy(frame, 0, untagged, 0, 12);
        System.arraycopy(frame, 12 + tag, untagged, 12, frame.length - 12 - tag);
        return execute(program, untagged, protocol(frame), 0);
    }

    private static int tagLength(final byte[] frame)
    {
        return (ByteBuffer.wrap(frame).getShort(12) & 0xFFFF) == 0x8100 ? 4 : 0;
    }

    private static int protocol(final byte[] frame)
    {
        return ByteBuffer.wrap(frame).getShort(12 + tagLength(frame)) & 0xFFFF;
    }

    private static int execute(final ClassicBpfProgram program, final byte[] network, final int protocol,
        final int flowHash)
    {
        final ByteBuffer data = ByteBuffer.wrap(network);
        int x = 0;
        int a = 0;
        int pc = 0;
        while (pc < program.length())
        {
            final int code = program.code(pc);
            final int k = program.constant(pc);
            final int cls = code & 0x07;
            switch (cls)
            {
                case ClassicBpfProgram.BPF_LDX ->
                {
                    if ((code & 0xE0) != ClassicBpfProgram.BPF_MSH || (code & 0x18) != ClassicBpfProgram.BPF_B)
                    {
                        throw new IllegalStateException("instruction " + pc + ": ldx mode not interpreted");
                    }
                    if (k < 0 || k >= network.length)
                    {
                        return 0;
                    }
                    x = 4 * (network[k] & 0x0F);
                    pc++;
                }
                case ClassicBpfProgram.BPF_LD ->
                {
                    final int mode = code & 0xE0;
                    if (mode != ClassicBpfProgram.BPF_ABS && mode != ClassicBpfProgram.BPF_IND)
                    {
                        throw new IllegalStateException("instruction " + pc + ": load mode not interpreted");
                    }
                    if (mode == ClassicBpfProgram.BPF_ABS &&
                        k == ClassicBpfProgram.SKF_AD_OFF + ClassicBpfProgram.SKF_AD_RXHASH)
                    {
                        a = flowHash;
                    }
                    else if (mode == ClassicBpfProgram.BPF_ABS &&
                        k == ClassicBpfProgram.SKF_AD_OFF + ClassicBpfProgram.SKF_AD_PROTOCOL)
                    {
                        a = protocol;
                    }
                    else
                    {
                        final int size = code & 0x18;
                        final int width = size == ClassicBpfProgram.BPF_H ? 2 : size == ClassicBpfProgram.BPF_B ? 1 : 4;
                        final int at = mode == ClassicBpfProgram.BPF_IND ? x + k : k;
                        if (at < 0 || at + width > network.length)
                        {
                            return 0;
                        }
                        a = width == 1 ? network[at] & 0xFF : width == 2 ? data.getShort(at) & 0xFFFF : data.getInt(at);
                    }
                    pc++;
                }
                case ClassicBpfProgram.BPF_ALU ->
                {
                    if ((code & 0xF8) != (ClassicBpfProgram.BPF_AND | ClassicBpfProgram.BPF_K))
                    {
                        throw new IllegalStateException("instruction " + pc + ": ALU operation not interpreted");
                    }
                    a &= k;
                    pc++;
                }
                case ClassicBpfProgram.BPF_JMP ->
                {
                    final int op = code & 0xF0;
                    if (op == ClassicBpfProgram.BPF_JA)
                    {
                        pc += 1 + k;
                    }
                    else
                    {
                        final boolean taken = switch (op)
                        {
                            case ClassicBpfProgram.BPF_JEQ -> a == k;
                            case ClassicBpfProgram.BPF_JGT -> Integer.compareUnsigned(a, k) > 0;
                            case ClassicBpfProgram.BPF_JGE -> Integer.compareUnsigned(a, k) >= 0;
                            default -> throw new IllegalStateException("instruction " + pc + ": jump not interpreted");
                        };
                        pc += 1 + (taken ? program.jumpTrue(pc) : program.jumpFalse(pc));
                    }
                }
                case ClassicBpfProgram.BPF_RET ->
                {
                    return (code & 0x18) == ClassicBpfProgram.BPF_A ? a : k;
                }
                default -> throw new IllegalStateException("instruction " + pc + ": class " + cls + " not interpreted");
            }
        }
        throw new IllegalStateException("ran off the program's end");
    }
}
