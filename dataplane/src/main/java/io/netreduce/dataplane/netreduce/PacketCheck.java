package io.netreduce.dataplane.netreduce;

import io.netreduce.dataplane.aggregator.AggregatorRegion;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.frame.ArrivingFrame;
import io.netreduce.dataplane.frame.FrameOutput;
import io.netreduce.dataplane.ring.Ring;
import io.netreduce.protocol.icrc.Crc32Combine;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.MutableDirectBuffer;

/**
 * The checks both sequencers share (a ring connection's packets in {@link Sequencer}, a leaf's entering
 * connection's in {@link DownSequencer}): a packet's placement by PSN against its connection's newest message, a
 * first packet's place on its connection's PSN sequence, and the ICRC. Their answers are left in fields
 * ({@link #placedAge()}, {@link #gradientCrc()}, ...), not objects: the per-packet path allocates nothing.
 * <p>
 * Single-threaded: owned by the dataplane thread.
 */
final class PacketCheck
{
    private final ConnectionTable clt;
    private final FrameOutput output;
    private final Icrc frameIcrc = new Icrc();
    /** CRC-32 of the gradient bytes of the frame {@link #checkIcrc} last accepted. */
    private int gradientCrc;
    /** CRC of the headers (up to the gradient) of the frame {@link #checkIcrc} last accepted. */
    private int checkedHeaderCrc;
    private int placedAge;
    private int placedPosition;
    private int placedMsgId;

    PacketCheck(final ConnectionTable clt, final FrameOutput output)
    {
        this.clt = clt;
        this.output = output;
    }

    /**
     * Whether the frame in hand looks as a member's frames do on the link: untagged (the switch delivers them on
     * the appliance's access port, as the members send them: a tag in the bytes, or one the port's kernel or NIC
     * took off, means the frame came some other way, say a host that tags its frames into a VLAN the appliance's
     * port also carries) and to a unicast MAC (its successor's: a broadcast or multicast frame is flooded, and a
     * result built from its headers would be flooded too). Checked first on every frame the appliance would take
     * into a ring (a tagged first packet of an installed ring, a spine result at a leaf, a packet of a ring or down
     * connection); pass-through traffic is not checked. Two loads and two tests: measured in
     * {@code PacketPathBenchmark} (docs/performance.md).
     *
     * @return false when the frame was dropped ({@code DROP_VLAN_TAGGED}, {@code DROP_NOT_UNICAST}).
     */
    boolean checkLinkLayer(final ArrivingFrame arriving)
    {
        if (arriving.frame().vlanCount() != 0 || (arriving.flags() & FrameHandler.FLAG_VLAN_TAG_STRIPPED) != 0)
        {
            output.drop(arriving, DataplaneCounter.DROP_VLAN_TAGGED);
            return false;
        }
        if ((arriving.buffer().getByte(arriving.offset() + EthernetHeader.DST_MAC_OFFSET) & 1) != 0)
        {
            output.drop(arriving, DataplaneCounter.DROP_NOT_UNICAST);
            return false;
        }
        return true;
    }

    /**
     * Whether the frame in hand comes from the MAC bound at {@code index} of the ring's {@link Ring#macs()} (a rank,
     * or a leaf's entering connection), or nothing is bound there yet.
     *
     * @return false when the frame was dropped ({@code DROP_MAC_MISMATCH}).
     */
    boolean checkSourceMac(final ArrivingFrame arriving, final Ring ring, final int index)
    {
        if (ring.macs().isMacBound(index) &&
            ring.macs().boundMac(index) != EthernetHeader.srcMac(arriving.buffer(), arriving.offset()))
        {
            output.drop(arriving, DataplaneCounter.DROP_MAC_MISMATCH);
            return false;
        }
        return true;
    }

    int gradientCrc()
    {
        return gradientCrc;
    }

    int checkedHeaderCrc()
    {
        return checkedHeaderCrc;
    }

    int placedAge()
    {
        return placedAge;
    }

    int placedPosition()
    {
        return placedPosition;
    }

    int placedMsgId()
    {
        return placedMsgId;
    }

    /**
     * The placement a middle or last packet of a connection shares, ring or down: its message (MsgID, age against
     * the connection's newest message) and position from its PSN, with the checks that need nothing else (a lost
     * first packet, too old, an opcode that does not fit the position, the wrong size), each a counted drop.
     * Leaves the placement in {@link #placedAge}, {@link #placedPosition} and {@link #placedMsgId}.
     *
     * @return false when the packet was dropped.
     */
    boolean placeByPsn(final ArrivingFrame arriving, final RoceFrame frame, final Ring ring, final int slot)
    {
        final int msgLen = ring.msgLen();
        final int delta = BthHeader.psnDelta(frame.psn(), clt.psn0(slot));
        final int age = Math.floorDiv(delta, msgLen);
        final int position = delta - age * msgLen;
        if (age >= 1)
        {
            output.drop(arriving, DataplaneCounter.DROP_FIRST_PACKET_LOST);
            return false;
        }
        if (age <= -ring.slots())
        {
            output.drop(arriving, DataplaneCounter.DROP_STALE_PACKET);
            return false;
        }
        final boolean last = Opcode.has(frame.opcode(), Opcode.IS_LAST);
        if (position == 0 || last != (position == msgLen - 1))
        {
            output.drop(arriving, DataplaneCounter.DROP_OPCODE_MISMATCH);
            return false;
        }
        if (frame.payloadLength() != ring.payloadSize() || frame.padCount() != 0)
        {
            output.drop(arriving, DataplaneCounter.DROP_WRONG_SIZE);
            return false;
        }
        placedAge = age;
        placedPosition = position;
        placedMsgId = (clt.msgId(slot) + age) & 0xFF;
        return true;
    }

    /**
     * Whether a tagged first packet (MsgID, PSN) lies on the PSN sequence of the connection in CLT slot
     * {@code slot}: every message is exactly MsgLen packets, so message MsgID0 + d starts at PSN0 + d * MsgLen.
     */
    boolean continuesPsnSequence(final int slot, final int msgId, final int psn, final int msgLen)
    {
        final int delta = (byte)(msgId - clt.msgId(slot));
        return psn == BthHeader.psnAdd(clt.psn0(slot), delta * msgLen);
    }

    /**
     * The checks every packet to be summed or translated ends with, first or later: its headers fit the
     * aggregator's header slot, and its ICRC matches the CRC of its headers combined with the CRC of its gradient
     * (shifted by {@code shiftOperator}, the packet's position). Leaves the header CRC in {@link #checkedHeaderCrc}
     * and the gradient's in {@link #gradientCrc}.
     *
     * @return false when the packet was dropped (malformed, bad ICRC).
     */
    boolean checkIcrc(final ArrivingFrame arriving, final RoceFrame frame, final int gradient, final int shiftOperator)
    {
        if (gradient - arriving.offset() > AggregatorRegion.HEADER_SLOT)
        {
            output.drop(arriving, DataplaneCounter.DROP_MALFORMED);
            return false;
        }
        final int headerCrc = frameIcrc.crcUpTo(frame, gradient);
        final int icrcOffset = frame.icrcOffset();
        final MutableDirectBuffer buffer = arriving.buffer();
        final int payloadCrc = frameIcrc.crcOf(buffer, gradient, icrcOffset - gradient);
        if (Crc32Combine.combineWithOperator(headerCrc, payloadCrc, shiftOperator) != Icrc.read(buffer, icrcOffset))
        {
            output.drop(arriving, DataplaneCounter.DROP_BAD_ICRC);
            return false;
        }
        checkedHeaderCrc = headerCrc;
        gradientCrc = payloadCrc;
        return true;
    }
}
