package io.netreduce.protocol.port;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;

/**
 * A classic BPF program (struct sock_filter[]), as the kernel takes it for a socket filter (SO_ATTACH_FILTER) or
 * an AF_PACKET fanout group's classifier (PACKET_FANOUT_DATA with PACKET_FANOUT_CBPF). Immutable. Build one with
 * {@link #builder()}, or use {@link #dropAll()}.
 * <p>
 * Classic BPF, not eBPF: the kernel checks and JIT-compiles it without CAP_BPF, any kernel since 4.5 takes it for
 * fanout, and a program of compares needs nothing more. Each instruction is 8 bytes: {@code u16 code, u8 jt,
 * u8 jf, u32 k}; jumps are relative to the next instruction and only forward.
 */
public final class ClassicBpfProgram
{
    /** The kernel's limit on a classic program's length (BPF_MAXINSNS). */
    public static final int MAX_INSTRUCTIONS = 4096;
    /** sizeof(struct sock_filter). */
    static final int INSTRUCTION_SIZE = 8;
    /** sizeof(struct sock_fprog) on LP64: unsigned short len, padding, struct sock_filter *filter. */
    static final int SOCK_FPROG_SIZE = 16;
    static final int SOCK_FPROG_LENGTH_OFFSET = 0;
    static final int SOCK_FPROG_FILTER_OFFSET = 8;

    // Instruction classes and modes (linux/bpf_common.h, linux/filter.h).
    static final int BPF_LD = 0x00;
    static final int BPF_LDX = 0x01;
    static final int BPF_ALU = 0x04;
    static final int BPF_JMP = 0x05;
    static final int BPF_RET = 0x06;
    static final int BPF_W = 0x00;
    static final int BPF_H = 0x08;
    static final int BPF_B = 0x10;
    static final int BPF_ABS = 0x20;
    static final int BPF_IND = 0x40;
    static final int BPF_MSH = 0xA0;
    static final int BPF_JA = 0x00;
    static final int BPF_JEQ = 0x10;
    static final int BPF_JGT = 0x20;
    static final int BPF_JGE = 0x30;
    static final int BPF_AND = 0x50;
    static final int BPF_K = 0x00;
    static final int BPF_A = 0x10;
    /** Ancillary loads start at this (negative) offset: SKF_AD_OFF. */
    static final int SKF_AD_OFF = -0x1000;
    /** Ancillary load of the skb's protocol (the EtherType, host order). */
    static final int SKF_AD_PROTOCOL = 0;
    /** Ancillary load of skb->mark, the mark the sending socket set (SO_MARK) or a firewall rule gave it. */
    static final int SKF_AD_MARK = 20;
    /** Ancillary load of skb->hash, the flow hash the stack or the NIC computed (0 if none). */
    static final int SKF_AD_RXHASH = 32;

    private final short[] codes;
    private final byte[] jumpsTrue;
    private final byte[] jumpsFalse;
    private final int[] constants;

    private ClassicBpfProgram(final short[] codes, final byte[] jumpsTrue, final byte[] jumpsFalse, final int[] constants)
    {
        this.codes = codes;
        this.jumpsTrue = jumpsTrue;
        this.jumpsFalse = jumpsFalse;
        this.constants = constants;
    }

    /**
     * @return a socket filter that accepts nothing ({@code ret #0}).
     */
    public static ClassicBpfProgram dropAll()
    {
        return builder().returnConstant(0).build();
    }

    public static Builder builder()
    {
        return new Builder();
    }

    public int length()
    {
        return codes.length;
    }

    public int code(final int index)
    {
        return codes[index] & 0xFFFF;
    }

    public int jumpTrue(final int index)
    {
        return jumpsTrue[index] & 0xFF;
    }

    public int jumpFalse(final int index)
    {
        return jumpsFalse[index] & 0xFF;
    }

    public int constant(final int index)
    {
        return constants[index];
    }

    /**
     * @return a struct sock_fprog in {@code arena} pointing at the instructions, also in {@code arena}.
     */
    MemorySegment toSockFprog(final Arena arena)
    {
        final MemorySegment filter = arena.allocate((long)INSTRUCTION_SIZE * codes.length, 8);
        for (int i = 0; i < codes.length; i++)
        {
            final long at = (long)i * INSTRUCTION_SIZE;
            filter.set(ValueLayout.JAVA_SHORT, at, codes[i]);
            filter.set(ValueLayout.JAVA_BYTE, at + 2, jumpsTrue[i]);
            filter.set(ValueLayout.JAVA_BYTE, at + 3, jumpsFalse[i]);
            filter.set(ValueLayout.JAVA_INT, at + 4, constants[i]);
        }
        final MemorySegment program = arena.allocate(SOCK_FPROG_SIZE, 8);
        program.set(ValueLayout.JAVA_SHORT, SOCK_FPROG_LENGTH_OFFSET, (short)codes.length);
        program.set(ValueLayout.ADDRESS, SOCK_FPROG_FILTER_OFFSET, filter);
        return program;
    }

    @Override
    public String toString()
    {
        return "ClassicBpfProgram{" + codes.length + " instructions}";
    }

    /**
     * Appends instructions; jump targets are given as absolute instruction indexes ({@link #label} gives the next
     * index) and turned into the relative offsets the kernel wants, checked to fit.
     */
    public static final class Builder
    {
        private short[] codes = new short[64];
        private byte[] jumpsTrue = new byte[64];
        private byte[] jumpsFalse = new byte[64];
        private int[] constants = new int[64];
        private int length;

        /**
         * @return the index the next instruction will have.
         */
        public int label()
        {
            return length;
        }

        /** {@code ld [k]}: A = the 32-bit big-endian word at offset k of the frame. */
        public Builder loadWordAbsolute(final int offset)
        {
            return add(BPF_LD | BPF_W | BPF_ABS, 0, 0, offset);
        }

        /** {@code ldh [k]}: A = the 16-bit big-endian half-word at offset k of the frame. */
        public Builder loadHalfAbsolute(final int offset)
        {
            return add(BPF_LD | BPF_H | BPF_ABS, 0, 0, offset);
        }

        /** {@code ldb [k]}: A = the byte at offset k of the frame. */
        public Builder loadByteAbsolute(final int offset)
        {
            return add(BPF_LD | BPF_B | BPF_ABS, 0, 0, offset);
        }

        /** {@code ldxb 4*([k]&0xf)}: X = the length of the IPv4 header whose first byte is at offset k. */
        public Builder loadIpv4HeaderLengthIntoX(final int offset)
        {
            return add(BPF_LDX | BPF_B | BPF_MSH, 0, 0, offset);
        }

        /** {@code ldh [x + k]}: A = the half-word at offset X + k of the frame. */
        public Builder loadHalfIndexed(final int offset)
        {
            return add(BPF_LD | BPF_H | BPF_IND, 0, 0, offset);
        }

        /** {@code ld [x + k]}: A = the 32-bit big-endian word at offset X + k of the frame. */
        public Builder loadWordIndexed(final int offset)
        {
            return add(BPF_LD | BPF_W | BPF_IND, 0, 0, offset);
        }

        /** {@code and #k}: A = A &amp; k. */
        public Builder andConstant(final int mask)
        {
            return add(BPF_ALU | BPF_AND | BPF_K, 0, 0, mask);
        }

        /** {@code ld proto}: A = the skb's EtherType (after any VLAN tag the kernel took off). */
        public Builder loadProtocol()
        {
            return add(BPF_LD | BPF_H | BPF_ABS, 0, 0, SKF_AD_OFF + SKF_AD_PROTOCOL);
        }

        /** {@code ld mark}: A = the skb's mark (SO_MARK of the socket that sent it, kept through the loopback). */
        public Builder loadMark()
        {
            return add(BPF_LD | BPF_W | BPF_ABS, 0, 0, SKF_AD_OFF + SKF_AD_MARK);
        }

        /** {@code ld rxhash}: A = the skb's flow hash. */
        public Builder loadFlowHash()
        {
            return add(BPF_LD | BPF_W | BPF_ABS, 0, 0, SKF_AD_OFF + SKF_AD_RXHASH);
        }

        /**
         * {@code jeq #k, target if equal, target if not}: both targets absolute indexes after this instruction,
         * at most 256 instructions on.
         */
        public Builder jumpIfEqual(final int value, final int targetIfEqual, final int targetIfNot)
        {
            final int next = length + 1;
            return add(BPF_JMP | BPF_JEQ | BPF_K, offset(targetIfEqual, next, 255), offset(targetIfNot, next, 255), value);
        }

        /**
         * {@code jge #k, target if A >= k, target if not} (unsigned), targets as {@link #jumpIfEqual}'s.
         */
        public Builder jumpIfAtLeast(final int value, final int targetIfAtLeast, final int targetIfNot)
        {
            final int next = length + 1;
            return add(BPF_JMP | BPF_JGE | BPF_K, offset(targetIfAtLeast, next, 255), offset(targetIfNot, next, 255),
                value);
        }

        /**
         * {@code jgt #k, target if A > k, target if not} (unsigned), targets as {@link #jumpIfEqual}'s.
         */
        public Builder jumpIfAbove(final int value, final int targetIfAbove, final int targetIfNot)
        {
            final int next = length + 1;
            return add(BPF_JMP | BPF_JGT | BPF_K, offset(targetIfAbove, next, 255), offset(targetIfNot, next, 255),
                value);
        }

        /** {@code ja target}: an unconditional jump of any forward distance. */
        public Builder jumpTo(final int target)
        {
            return add(BPF_JMP | BPF_JA, 0, 0, offset(target, length + 1, Integer.MAX_VALUE));
        }

        /** {@code ret #k}. */
        public Builder returnConstant(final int value)
        {
            return add(BPF_RET | BPF_K, 0, 0, value);
        }

        /** {@code ret a}. */
        public Builder returnAccumulator()
        {
            return add(BPF_RET | BPF_A, 0, 0, 0);
        }

        /**
         * Replace the target of the unconditional jump at {@code index}.
         */
        public Builder patchJumpTo(final int index, final int target)
        {
            constants[index] = offset(target, index + 1, Integer.MAX_VALUE);
            return this;
        }

        /**
         * @throws IllegalStateException if the program is empty, longer than {@link #MAX_INSTRUCTIONS} or a jump
         *                               leaves it.
         */
        public ClassicBpfProgram build()
        {
            if (length == 0 || length > MAX_INSTRUCTIONS)
            {
                throw new IllegalStateException("a classic BPF program has 1 to " + MAX_INSTRUCTIONS +
                    " instructions: " + length);
            }
            for (int i = 0; i < length; i++)
            {
                final int cls = codes[i] & 0x07;
                if (cls == BPF_JMP)
                {
                    final long farthest = (codes[i] & 0xF0) == BPF_JA ? i + 1L + constants[i] :
                        i + 1L + Math.max(jumpsTrue[i] & 0xFF, jumpsFalse[i] & 0xFF);
                    if (farthest >= length)
                    {
                        throw new IllegalStateException("instruction " + i + " jumps past the program's end");
                    }
                }
            }
            if ((codes[length - 1] & 0x07) != BPF_RET)
            {
                throw new IllegalStateException("a classic BPF program must end with a return");
            }
            return new ClassicBpfProgram(Arrays.copyOf(codes, length), Arrays.copyOf(jumpsTrue, length),
                Arrays.copyOf(jumpsFalse, length), Arrays.copyOf(constants, length));
        }

        private Builder add(final int code, final int jumpTrue, final int jumpFalse, final int constant)
        {
            if (length == codes.length)
            {
                codes = Arrays.copyOf(codes, length * 2);
                jumpsTrue = Arrays.copyOf(jumpsTrue, length * 2);
                jumpsFalse = Arrays.copyOf(jumpsFalse, length * 2);
                constants = Arrays.copyOf(constants, length * 2);
            }
            codes[length] = (short)code;
            jumpsTrue[length] = (byte)jumpTrue;
            jumpsFalse[length] = (byte)jumpFalse;
            constants[length] = constant;
            length++;
            return this;
        }

        private static int offset(final int target, final int next, final int limit)
        {
            final int offset = target - next;
            if (offset < 0 || offset > limit)
            {
                throw new IllegalStateException("jump to " + target + " from " + (next - 1) +
                    ": classic BPF jumps forward by at most " + limit);
            }
            return offset;
        }
    }
}
