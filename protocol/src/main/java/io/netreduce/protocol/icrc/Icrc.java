package io.netreduce.protocol.icrc;

import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.zip.CRC32;

/**
 * The RoCEv2 invariant CRC (IBTA Annex A17.3.3): CRC-32 over a pseudo-LRH of eight 0xFF bytes, the IP header,
 * the UDP header, the BTH and everything after it up to the ICRC, with the variant fields masked to ones:
 * <ul>
 *   <li>IPv4: TOS (DSCP+ECN), TTL, header checksum;</li>
 *   <li>IPv6: traffic class, flow label, hop limit;</li>
 *   <li>UDP checksum;</li>
 *   <li>BTH byte 4 (FECN, BECN, Resv6).</li>
 * </ul>
 * The 32-bit result is stored least significant byte first, as NICs do.
 * <p>
 * One pass over the payload: only the headers (at most a few dozen bytes) are copied, into a scratch buffer, to
 * be masked. {@link java.util.zip.CRC32} is used for the bulk because the JIT turns it into a carry-less
 * multiply loop. Instances are not thread-safe; each agent owns one.
 */
public final class Icrc
{
    /** The pseudo Local Route Header: eight bytes of 0xFF in place of the LRH RoCEv2 does not have. */
    public static final int MASKED_LRH_LENGTH = 8;
    private static final int SCRATCH_LENGTH = 256;
    private static final int COPY_CHUNK = 4096;

    private final CRC32 crc = new CRC32();
    private final byte[] scratchArray = new byte[SCRATCH_LENGTH];
    private byte[] copyChunk;

    /**
     * @return the ICRC of a parsed frame whose status is {@link RoceFrame#OK} or {@link RoceFrame#UNKNOWN_OPCODE}.
     */
    public int compute(final RoceFrame frame)
    {
        return crcUpTo(frame, frame.icrcOffset());
    }

    /**
     * @return the CRC-32 of the masked pseudo-header and of the frame's bytes from the end of the BTH up to
     * {@code endOffset}: the first half of a combined ICRC whose second half starts at {@code endOffset}.
     */
    public int crcUpTo(final RoceFrame frame, final int endOffset)
    {
        crc.reset();
        updateMaskedHeaders(frame);
        final int from = frame.extensionOffset();
        update(frame.buffer(), from, endOffset - from);
        return (int)crc.getValue();
    }

    /**
     * @return the CRC-32 of an arbitrary byte range (for the shared half of a combined ICRC).
     */
    public int crcOf(final DirectBuffer buffer, final int index, final int length)
    {
        crc.reset();
        update(buffer, index, length);
        return (int)crc.getValue();
    }

    /**
     * What rewriting a big-endian int does to the CRC-32 of a message, when the int ends {@code bytesAfter}
     * bytes before the message's end: {@code crc(after) == crc(before) ^ rewriteDelta(old, new, bytesAfter)},
     * whatever comes before it. CRC-32 is affine over GF(2), so two messages of one length differ in CRC by the
     * zero-initialised CRC of their XOR, and leading zeros do not change that. The dataplane uses it to mark a
     * first packet's stored header as a result without computing the header's CRC a second time.
     * Allocates; call it at set-up, not per packet.
     */
    public static int rewriteDelta(final int oldValue, final int newValue, final int bytesAfter)
    {
        final ByteBuffer before = ByteBuffer.allocate(Integer.BYTES + bytesAfter).putInt(0, oldValue);
        final ByteBuffer after = ByteBuffer.allocate(Integer.BYTES + bytesAfter).putInt(0, newValue);
        final CRC32 crc = new CRC32();
        crc.update(before);
        final int beforeCrc = (int)crc.getValue();
        crc.reset();
        crc.update(after);
        return beforeCrc ^ (int)crc.getValue();
    }

    public boolean verify(final RoceFrame frame)
    {
        return read(frame.buffer(), frame.icrcOffset()) == compute(frame);
    }

    /**
     * Recompute the frame's ICRC and store it.
     */
    public void write(final MutableDirectBuffer buffer, final RoceFrame frame)
    {
        put(buffer, frame.icrcOffset(), compute(frame));
    }

    public static int read(final DirectBuffer buffer, final int icrcOffset)
    {
        return buffer.getInt(icrcOffset, ByteOrder.LITTLE_ENDIAN);
    }

    public static void put(final MutableDirectBuffer buffer, final int icrcOffset, final int icrc)
    {
        buffer.putInt(icrcOffset, icrc, ByteOrder.LITTLE_ENDIAN);
    }

    private void updateMaskedHeaders(final RoceFrame frame)
    {
        final DirectBuffer buffer = frame.buffer();
        final int l3 = frame.l3Offset();
        final int headerBytes = frame.extensionOffset() - l3;
        for (int i = 0; i < MASKED_LRH_LENGTH; i++)
        {
            scratchArray[i] = (byte)0xFF;
        }
        buffer.getBytes(l3, scratchArray, MASKED_LRH_LENGTH, headerBytes);
        final int ip = MASKED_LRH_LENGTH;
        if (frame.ipVersion() == 4)
        {
            scratchArray[ip + Ipv4Header.TOS_OFFSET] = (byte)0xFF;
            scratchArray[ip + Ipv4Header.TTL_OFFSET] = (byte)0xFF;
            scratchArray[ip + Ipv4Header.CHECKSUM_OFFSET] = (byte)0xFF;
            scratchArray[ip + Ipv4Header.CHECKSUM_OFFSET + 1] = (byte)0xFF;
        }
        else
        {
            // version nibble kept; traffic class (8 bits) and flow label (20 bits) all ones
            scratchArray[ip] = (byte)(scratchArray[ip] | 0x0F);
            scratchArray[ip + 1] = (byte)0xFF;
            scratchArray[ip + 2] = (byte)0xFF;
            scratchArray[ip + 3] = (byte)0xFF;
            scratchArray[ip + 7] = (byte)0xFF; // hop limit
        }
        final int udp = ip + frame.ipHeaderLength();
        scratchArray[udp + UdpHeader.CHECKSUM_OFFSET] = (byte)0xFF;
        scratchArray[udp + UdpHeader.CHECKSUM_OFFSET + 1] = (byte)0xFF;
        final int bth = udp + UdpHeader.LENGTH;
        scratchArray[bth + BthHeader.RESV8A_OFFSET] = (byte)0xFF;
        crc.update(scratchArray, 0, MASKED_LRH_LENGTH + headerBytes);
    }

    private void update(final DirectBuffer buffer, final int index, final int length)
    {
        if (length <= 0)
        {
            return;
        }
        final byte[] array = buffer.byteArray();
        if (array != null)
        {
            crc.update(array, buffer.wrapAdjustment() + index, length);
            return;
        }
        final ByteBuffer source = buffer.byteBuffer();
        if (source != null)
        {
            // CRC32 reads a direct ByteBuffer from its position to its limit: the source's own are set to the bytes.
            // The buffers that come here (ports' rings and batches, registered memory, frames in tests) are read and
            // written by index through UnsafeBuffer, never by position, each by one thread. A view per source, cached
            // and rebuilt when another source came, was a branch that one endpoint's packets never take, so C2
            // compiled it as a trap: the next endpoint on a new port (a sidecar agent's next session) hit it and
            // threw the whole packet path's compiled code away (docs/python.md, "The sidecar agent").
            final int start = buffer.wrapAdjustment() + index;
            source.limit(start + length).position(start);
            crc.update(source);
            return;
        }
        // A buffer over a raw address: copy through a chunk. Ports wrap their rings with ByteBuffers to avoid this.
        if (copyChunk == null)
        {
            copyChunk = new byte[COPY_CHUNK];
        }
        int done = 0;
        while (done < length)
        {
            final int n = Math.min(COPY_CHUNK, length - done);
            buffer.getBytes(index + done, copyChunk, 0, n);
            crc.update(copyChunk, 0, n);
            done += n;
        }
    }
}
