package io.netreduce.daemon.pcap;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.pcap.PcapRecord;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;

/**
 * What one capture record is, as the pcap commands judge it: not RoCEv2, a RoCEv2 frame whose ICRC can be
 * checked, or a RoCEv2 frame too broken to check. Shared by {@code verify} and {@code fix} so they agree.
 */
final class FrameVerdict
{
    enum Kind
    {
        /** Not a RoCEv2 frame (or one too short to tell): passed over. */
        OTHER,
        /** A RoCEv2 frame with every layer where its lengths say: its ICRC can be computed. */
        CHECKABLE,
        /** A RoCEv2 frame (UDP port 4791) that is cut short or whose lengths disagree. */
        MALFORMED
    }

    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();
    private Kind kind;
    private String problem;

    /**
     * Judge a record. Never throws: a parser failure on hostile bytes is reported as a malformed frame.
     */
    Kind judge(final PcapRecord record)
    {
        problem = null;
        int status;
        try
        {
            status = frame.wrap(record.buffer(), 0, record.capturedLength());
        }
        catch (final RuntimeException ex)
        {
            problem = "malformed (parser error: " + ex + ")";
            return kind = Kind.MALFORMED;
        }

        switch (status)
        {
            case RoceFrame.OK, RoceFrame.UNKNOWN_OPCODE ->
                // Even when the snap length cut the record, the IP packet and its ICRC are whole here (only
                // Ethernet padding was lost), so the frame is checkable.
                kind = Kind.CHECKABLE;
            case RoceFrame.TRUNCATED ->
            {
                problem = record.isTruncated() ?
                    "truncated (captured " + record.capturedLength() + " of " + record.originalLength() +
                        " bytes; ICRC not in capture)" :
                    "truncated (IP length runs past the " + record.capturedLength() + "-byte frame)";
                kind = Kind.MALFORMED;
            }
            case RoceFrame.MALFORMED ->
            {
                problem = "malformed (UDP length, opcode headers and pad count do not fit the packet)";
                kind = Kind.MALFORMED;
            }
            default -> kind = Kind.OTHER;
        }
        return kind;
    }

    /**
     * @return true if the frame's ICRC equals the one computed over it; only for {@link Kind#CHECKABLE}.
     */
    boolean icrcOk()
    {
        return icrc.verify(frame);
    }

    /**
     * Overwrite the frame's ICRC with the computed one; only for {@link Kind#CHECKABLE}.
     *
     * @return true if the ICRC changed.
     */
    boolean rewriteIcrc(final PcapRecord record)
    {
        final int computed = icrc.compute(frame);
        if (Icrc.read(frame.buffer(), frame.icrcOffset()) == computed)
        {
            return false;
        }
        Icrc.put(record.buffer(), frame.icrcOffset(), computed);
        return true;
    }

    /**
     * @return "{@code <opcode-name> psn=<n> qp=<hex>}" for a checkable frame.
     */
    String describe()
    {
        return Opcode.name(frame.opcode()) + " psn=" + (frame.psn() & BthHeader.PSN_MASK) +
            " qp=0x" + String.format("%06x", frame.destQp() & BthHeader.QP_MASK);
    }

    /**
     * @return why a {@link Kind#MALFORMED} frame cannot be checked.
     */
    String problem()
    {
        return problem;
    }
}
