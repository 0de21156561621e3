package io.netreduce.protocol.port;

import org.agrona.MutableDirectBuffer;

/**
 * Receives frames from a {@link PacketPort} during {@link PacketPort#receive(FrameHandler, int)}.
 * <p>
 * The buffer view is only valid for the duration of the callback: it points into the port's receive ring,
 * which the kernel reuses once the callback returns. Copy anything that must outlive the call.
 */
@FunctionalInterface
public interface FrameHandler
{
    /**
     * The frame's checksum was left for offload (TP_STATUS_CSUMNOTREADY): the L4 checksum field holds
     * only the pseudo-header sum. A frame forwarded unchanged must have its checksum completed first.
     */
    int FLAG_CHECKSUM_NOT_READY = 1;

    /**
     * The frame arrived with a VLAN tag that the kernel (or the NIC's VLAN offload) removed from its bytes before
     * the port saw them (TP_STATUS_VLAN_VALID): the bytes are untagged, the frame on the wire was not. A tag that
     * is still in the bytes (the second tag of a QinQ frame, or any tag on a port that does not strip) is not
     * flagged; parse it.
     */
    int FLAG_VLAN_TAG_STRIPPED = 2;

    /**
     * @param buffer the frame's bytes, starting with the Ethernet header at {@code offset}.
     * @param offset where the frame starts in {@code buffer}.
     * @param length frame length in bytes (no FCS).
     * @param flags  bit set of {@code FLAG_*} values.
     */
    void onFrame(MutableDirectBuffer buffer, int offset, int length, int flags);
}
