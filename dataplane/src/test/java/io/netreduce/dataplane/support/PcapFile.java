package io.netreduce.dataplane.support;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Writes frames to a classic little-endian microsecond pcap (link type Ethernet), for checking them with tools
 * we did not write.
 */
public final class PcapFile
{
    private PcapFile()
    {
    }

    public static void write(final Path path, final List<byte[]> frames) throws IOException
    {
        int size = 24;
        for (final byte[] frame : frames)
        {
            size += 16 + frame.length;
        }
        final ByteBuffer out = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
        out.putInt(0xA1B2C3D4).putShort((short)2).putShort((short)4).putInt(0).putInt(0).putInt(65535).putInt(1);
        int second = 0;
        for (final byte[] frame : frames)
        {
            out.putInt(second++).putInt(0).putInt(frame.length).putInt(frame.length).put(frame);
        }
        Files.write(path, out.array());
    }
}
