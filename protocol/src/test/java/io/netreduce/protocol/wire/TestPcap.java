package io.netreduce.protocol.wire;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * Reads the frames of a classic little-endian pcap resource; only for wire tests, which must not depend on the
 * pcap tooling they help to validate.
 */
public final class TestPcap
{
    public static final String RXE_CAPTURE = "/pcap/rxe-rc-write-send-ack.pcap";

    private TestPcap()
    {
    }

    public static List<byte[]> frames(final String resource) throws IOException
    {
        final byte[] all;
        try (InputStream in = TestPcap.class.getResourceAsStream(resource))
        {
            if (in == null)
            {
                throw new IOException("missing resource " + resource);
            }
            all = in.readAllBytes();
        }
        final ByteBuffer bb = ByteBuffer.wrap(all).order(ByteOrder.LITTLE_ENDIAN);
        if (bb.getInt(0) != 0xA1B2C3D4)
        {
            throw new IOException("not a little-endian microsecond pcap: " + resource);
        }
        final List<byte[]> frames = new ArrayList<>();
        int position = 24;
        while (position + 16 <= all.length)
        {
            final int captured = bb.getInt(position + 8);
            position += 16;
            final byte[] frame = new byte[captured];
            System.arraycopy(all, position, frame, 0, captured);
            frames.add(frame);
            position += captured;
        }
        return frames;
    }
}
