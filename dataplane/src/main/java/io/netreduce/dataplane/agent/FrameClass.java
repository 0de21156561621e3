package io.netreduce.dataplane.agent;

import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.SwitchMlHeader;

/**
 * The protocol classes the dispatch ({@link PacketProcessor}) tells apart, decided once per frame from its parse
 * ({@link RoceFrame}'s status, opcode and UDP destination port). Ints, not an enum: the class is computed and
 * switched on for every frame.
 */
final class FrameClass
{
    /** Not a protocol the appliance aggregates: sent on unchanged. */
    static final int PASS_THROUGH = 0;
    /** A well-formed RoCEv2 RC RDMA WRITE packet: NetReduce's to judge (ring traffic or not). */
    static final int ROCE_WRITE = 1;
    /** Any other RoCEv2 (responses, other opcodes, truncated or malformed): NetReduce's to guard its rings. */
    static final int OTHER_ROCE = 2;
    /** UDP to a SwitchML port (0xBEE0/0xFFF0): SwitchML's (its jobs decide; a job not installed passes through). */
    static final int SWITCHML = 3;

    private FrameClass()
    {
    }

    /**
     * @param status the frame's parse status, {@code frame.wrap}'s answer.
     */
    static int of(final RoceFrame frame, final int status)
    {
        if (status == RoceFrame.NOT_ROCE)
        {
            return SwitchMlHeader.isSwitchMlPort(frame.udpDstPort()) ? SWITCHML : PASS_THROUGH;
        }
        if (status == RoceFrame.OK && isRcWrite(frame.opcode()))
        {
            return ROCE_WRITE;
        }
        return OTHER_ROCE;
    }

    private static boolean isRcWrite(final int opcode)
    {
        return opcode >= Opcode.RDMA_WRITE_FIRST && opcode <= Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE;
    }
}
