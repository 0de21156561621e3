package io.netreduce.dataplane.agent;

import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortCounters;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.util.List;

/**
 * A port in memory that hands an agent pre-built frames from one direct buffer, as a receive ring would, each once
 * per {@link #rewind}, and counts the frames the agent sends (claimed in its transmit slot or copied), which go
 * nowhere. For running the packet path on made-up traffic: the start-up warm-up ({@link PacketPathWarmUp}) and the
 * per-packet benchmark. Frame i sits at {@code i x stride}; whoever fills it sets its length.
 */
public final class ReplayPort implements PacketPort
{
    // The frames and the claim slot are views as a real port's rings are (AfPacketPort.ringView: the warm-up's
    // compiled code then holds for real frames); these fields keep their memory alive.
    private final ByteBuffer framesMemory;
    private final UnsafeBuffer frames;
    private final int stride;
    private final int[] lengths;
    private final int[] flags;
    private final ByteBuffer claimMemory = ByteBuffer.allocateDirect(16 * 1024);
    private final UnsafeBuffer claim = AfPacketPort.ringView(claimMemory);
    private final PortCounters counters = new PortCounters();
    private int loaded;
    private int next;
    private long sent;

    /**
     * @param capacity frames the port holds.
     * @param stride   bytes each frame may take (rounded up to 64).
     */
    public ReplayPort(final int capacity, final int stride)
    {
        this.stride = (stride + 63) & ~63;
        this.framesMemory = ByteBuffer.allocateDirect(this.stride * capacity);
        this.frames = AfPacketPort.ringView(framesMemory);
        this.lengths = new int[capacity];
        this.flags = new int[capacity];
    }

    /**
     * @return a port holding {@code list}'s frames, handing none over until {@link #rewind rewound}.
     */
    public static ReplayPort of(final List<byte[]> list)
    {
        int longest = 0;
        for (final byte[] frame : list)
        {
            longest = Math.max(longest, frame.length);
        }
        final ReplayPort port = new ReplayPort(list.size(), longest);
        for (int i = 0; i < list.size(); i++)
        {
            port.frames.putBytes(port.offset(i), list.get(i));
            port.length(i, list.get(i).length);
        }
        return port;
    }

    /**
     * @return the buffer the frames are built in.
     */
    public MutableDirectBuffer frames()
    {
        return frames;
    }

    /**
     * @return where frame {@code index} starts in {@link #frames()}.
     */
    public int offset(final int index)
    {
        return index * stride;
    }

    public int length(final int index)
    {
        return lengths[index];
    }

    public void length(final int index, final int length)
    {
        lengths[index] = length;
    }

    /**
     * @param flags the {@link FrameHandler} flags frame {@code index} is handed over with, as a receive ring reports
     *              them (0 unless set).
     */
    public void flags(final int index, final int flags)
    {
        this.flags[index] = flags;
    }

    /**
     * Hand over the first {@code count} frames again, from the first.
     */
    public void rewind(final int count)
    {
        loaded = count;
        next = 0;
    }

    /**
     * @return frames of the last {@link #rewind} not handed over yet.
     */
    public int remaining()
    {
        return loaded - next;
    }

    /**
     * @return the frames it holds: a receive ring's slots, so that a lane's backlog check (its own ECN marks) runs
     *         on it as on a real port.
     */
    @Override
    public int receiveCapacity()
    {
        return lengths.length;
    }

    /**
     * @return whether {@code frames} or more of the loaded frames wait to be read, as a backed-up receive ring.
     */
    @Override
    public boolean receiveBacklogAtLeast(final int frames)
    {
        return remaining() >= frames;
    }

    /**
     * @return frames the agent sent since the port was made or {@link #resetSent()}.
     */
    public long sent()
    {
        return sent;
    }

    public void resetSent()
    {
        sent = 0;
    }

    @Override
    public String name()
    {
        return "replay";
    }

    @Override
    public int receive(final FrameHandler handler, final int limit)
    {
        final int count = Math.min(limit, loaded - next);
        for (int i = 0; i < count; i++)
        {
            handler.onFrame(frames, next * stride, lengths[next], flags[next]);
            next++;
        }
        return count;
    }

    @Override
    public boolean send(final DirectBuffer buffer, final int offset, final int length)
    {
        sent++;
        return true;
    }

    @Override
    public int tryClaim(final int length)
    {
        return 0;
    }

    @Override
    public MutableDirectBuffer claimBuffer()
    {
        return claim;
    }

    @Override
    public void commit()
    {
        sent++;
    }

    @Override
    public int flush()
    {
        return 0;
    }

    @Override
    public PortCounters counters()
    {
        return counters;
    }

    @Override
    public void close()
    {
    }
}
