package io.netreduce.dataplane.support;

import io.netreduce.dataplane.port.FrameHandler;
import io.netreduce.dataplane.port.PacketPort;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * An in-memory port for tests: frames injected are received in order; frames sent are kept, in order, once
 * flushed. Each received frame is delivered from a direct buffer at a non-zero offset, as a ring would.
 */
public final class TestPort implements PacketPort
{
    private final String name;
    private final ArrayDeque<byte[]> incoming = new ArrayDeque<>();
    private final ArrayDeque<Integer> incomingFlags = new ArrayDeque<>();
    private final List<byte[]> queued = new ArrayList<>();
    private final List<byte[]> sent = new ArrayList<>();
    private final UnsafeBuffer rx = new UnsafeBuffer(java.nio.ByteBuffer.allocateDirect(20_000));

    public TestPort(final String name)
    {
        this.name = name;
    }

    public void inject(final byte[] frame)
    {
        inject(frame, 0);
    }

    public void inject(final byte[] frame, final int flags)
    {
        incoming.add(frame);
        incomingFlags.add(flags);
    }

    public int pending()
    {
        return incoming.size();
    }

    /**
     * @return the frames sent and flushed since the last call.
     */
    public List<byte[]> drainSent()
    {
        final List<byte[]> copy = new ArrayList<>(sent);
        sent.clear();
        return copy;
    }

    @Override
    public String name()
    {
        return name;
    }

    @Override
    public int receive(final FrameHandler handler, final int limit)
    {
        int count = 0;
        while (count < limit && !incoming.isEmpty())
        {
            final byte[] frame = incoming.poll();
            final int flags = incomingFlags.poll();
            rx.putBytes(128, frame);
            handler.onFrame(rx, 128, frame.length, flags);
            count++;
        }
        return count;
    }

    @Override
    public boolean send(final DirectBuffer buffer, final int offset, final int length)
    {
        final byte[] copy = new byte[length];
        buffer.getBytes(offset, copy);
        queued.add(copy);
        return true;
    }

    @Override
    public int flush()
    {
        final int n = queued.size();
        sent.addAll(queued);
        queued.clear();
        return n;
    }

    @Override
    public void close()
    {
    }
}
