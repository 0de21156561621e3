package io.netreduce.dataplane.support;

import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.ByteArrayOutputStream;
import java.util.List;

/**
 * What tests compare result packets with: the message a connection delivered, and the one it should deliver.
 */
public final class Results
{
    private Results()
    {
    }

    /**
     * @return the RC payloads of message {@code m} of a connection's result packets, concatenated.
     */
    public static byte[] payloads(final List<byte[]> packets, final int m, final int msgLen)
    {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final RoceFrame frame = new RoceFrame();
        for (int i = m * msgLen; i < (m + 1) * msgLen && i < packets.size(); i++)
        {
            final byte[] bytes = packets.get(i);
            frame.wrap(new UnsafeBuffer(bytes), 0, bytes.length);
            out.write(bytes, frame.payloadOffset(), frame.payloadLength());
        }
        return out.toByteArray();
    }

    /**
     * @return the result message {@code m} of the connection of {@code senderRank}: its INA header with the ring's
     *         result tag, then the sum.
     */
    public static byte[] expected(final RingDefinition config, final int senderRank, final int m, final byte[] sum)
    {
        final byte[] message = new byte[InaHeader.LENGTH + sum.length];
        InaHeader.write(new UnsafeBuffer(message), 0, config.resultTag(), config.ringId(), m & 0xFF, config.msgLen(),
            senderRank);
        System.arraycopy(sum, 0, message, InaHeader.LENGTH, sum.length);
        return message;
    }
}
