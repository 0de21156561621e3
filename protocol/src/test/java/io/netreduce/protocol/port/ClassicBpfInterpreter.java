package io.netreduce.protocol.port;

import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * Test oracle: runs a {@link ClassicBpfProgram} as the kernel runs a fanout classifier, for the instructions
 * netreduce emits (absolute word loads, the protocol and flow-hash ancillary loads, jeq #k, ja, ret #k, ret a).
 * As in the kernel, the program sees the frame from its network header on, an 802.1Q tag already taken off into
 * the metadata, and a load past the end ends the program with 0.
 */
final class ClassicBpfInterpreter
{
    private ClassicBpfInterpreter()
    {
    }

    /**
     * @param frame    the frame from its Ethernet header.
     * @param flowHash what the flow-hash load returns.
     */
    static int run(final ClassicBpfProgram program, final byte[] frame, final int flowHash)
    {
        final ByteBuffer ethernet = ByteBuffer.wrap(frame);
        int protocol = ethernet.getShort(12) & 0xFFFF;
        int networkHeader = 14;
        if (protocol == 0x8100)
        {
            protocol = ethernet.getShort(16) & 0xFFFF;
            networkHeader = 18;
        }
        final byte[] network = Arrays.copyOfRange(frame, networkHeader, frame.length);
        final ByteBuffer data = ByteBuffer.wrap(network);
        int a = 0;
        int pc = 0;
        while (pc < program.length())
        {
            final int code = program.code(pc);
            final int k = program.constant(pc);
            final int cls = code & 0x07;
            switch (cls)
            {
                case ClassicBpfProgram.BPF_LD ->
                {
                    if ((code & 0xE0) != ClassicBpfProgram.BPF_ABS)
                    {
                        throw new IllegalStateException("instruction " + pc + ": load mode not interpreted");
                    }
                    if (k == ClassicBpfProgram.SKF_AD_OFF + ClassicBpfProgram.SKF_AD_RXHASH)
                    {
                        a = flowHash;
                    }
                    else if (k == ClassicBpfProgram.SKF_AD_OFF + ClassicBpfProgram.SKF_AD_PROTOCOL)
                    {
                        a = protocol;
                    }
                    else
                    {
                        final int width = (code & 0x18) == ClassicBpfProgram.BPF_H ? 2 : 4;
                        if (k < 0 || k + width > network.length)
                        {
                            return 0;
                        }
                        a = width == 2 ? data.getShort(k) & 0xFFFF : data.getInt(k);
                    }
                    pc++;
                }
                case ClassicBpfProgram.BPF_JMP ->
                {
                    if ((code & 0xF0) == ClassicBpfProgram.BPF_JA)
                    {
                        pc += 1 + k;
                    }
                    else
                    {
                        pc += 1 + (a == k ? program.jumpTrue(pc) : program.jumpFalse(pc));
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
