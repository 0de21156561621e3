package io.netreduce.protocol.port;

import org.agrona.BitUtil;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.MessageHandler;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RecordDescriptor;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An in-memory {@link PacketPort} for tests and simulations.
 * <p>
 * Received frames come from an inbound queue that tests fill with {@link #inject} (from any thread; frames are
 * copied) or that a {@linkplain #wire(MemoryPort, MemoryPort) wired} peer fills when it flushes. Sent frames are
 * staged in preallocated slots until {@link #flush()}, which moves them, in order, either into the peer's inbound
 * queue or, for an unwired port, into an outbound queue that tests read with {@link #drainSent()}.
 * <p>
 * {@link #receive}, {@link #send} and {@link #flush} do not allocate. Like a real port, a frame that finds the
 * peer's inbound queue full is lost and counted as {@code rx_dropped} by the peer; one that finds an unwired
 * port's outbound queue full is counted as {@code tx_errors}.
 */
public final class MemoryPort implements PacketPort
{
    /** Largest frame accepted by default: a 9000-byte MTU jumbo frame with a VLAN tag fits. */
    public static final int DEFAULT_MAX_FRAME_LENGTH = 9216;
    /** Frames that can be queued by {@link #send} between two flushes, by default. */
    public static final int DEFAULT_TX_SLOTS = 256;
    /** Bytes of each of the inbound and outbound queues by default (a power of two). */
    public static final int DEFAULT_QUEUE_CAPACITY = 1 << 21;

    /** Inbound and outbound records carry flags + 1 as their type: ring buffer record types must be positive. */
    private static final int FLAGS_TYPE_BIAS = 1;

    private final String name;
    private final int maxFrameLength;
    private final PortCounters counters = new PortCounters();
    private final ByteBuffer inboundMemory;
    private final ByteBuffer outboundMemory;
    private final ByteBuffer txMemory;
    private final ManyToOneRingBuffer inbound;
    private final ManyToOneRingBuffer outbound;
    private final UnsafeBuffer txSlots;
    private final int[] txLengths;
    private final AtomicLong inboundLost = new AtomicLong();
    private final AtomicLong inboundWaiting = new AtomicLong();
    private final MessageHandler inboundReader = this::onInboundRecord;
    private volatile MemoryPort peer;
    private FrameHandler currentHandler;
    private long inboundLostCounted;
    private int txQueued;
    private int claimLength;
    private boolean closed;

    /**
     * A port with the default frame size limit, slot count and queue capacity.
     */
    public MemoryPort(final String name)
    {
        this(name, DEFAULT_MAX_FRAME_LENGTH, DEFAULT_TX_SLOTS, DEFAULT_QUEUE_CAPACITY);
    }

    /**
     * @param name           port name reported by {@link #name()}.
     * @param maxFrameLength largest frame {@link #send} and {@link #inject} accept.
     * @param txSlots        frames {@link #send} can queue before a {@link #flush()}.
     * @param queueCapacity  bytes of the inbound and outbound queues; a power of two, at least 8 maximal frames.
     */
    public MemoryPort(final String name, final int maxFrameLength, final int txSlots, final int queueCapacity)
    {
        if (maxFrameLength <= 0 || txSlots <= 0)
        {
            throw new IllegalArgumentException("maxFrameLength and txSlots must be positive");
        }
        if (!BitUtil.isPowerOfTwo(queueCapacity) || queueCapacity / 8 < maxFrameLength + 64)
        {
            throw new IllegalArgumentException(
                "queueCapacity must be a power of two of at least 8 maximal frames: " + queueCapacity);
        }
        this.name = name;
        this.maxFrameLength = maxFrameLength;
        // Views as a real port's rings are (AfPacketPort.ringView), so that code compiled while a memory port runs
        // (the workers' warm-up) holds for real frames; the memory fields keep their memory alive.
        this.inboundMemory = ByteBuffer.allocateDirect(queueCapacity + RingBufferDescriptor.TRAILER_LENGTH);
        this.outboundMemory = ByteBuffer.allocateDirect(queueCapacity + RingBufferDescriptor.TRAILER_LENGTH);
        this.txMemory = ByteBuffer.allocateDirect(txSlots * maxFrameLength);
        this.inbound = new ManyToOneRingBuffer(AfPacketPort.ringView(inboundMemory));
        this.outbound = new ManyToOneRingBuffer(AfPacketPort.ringView(outboundMemory));
        this.txSlots = AfPacketPort.ringView(txMemory);
        this.txLengths = new int[txSlots];
    }

    /**
     * Connect two ports back to back: whatever one flushes, the other receives. Replaces earlier wiring.
     */
    public static void wire(final MemoryPort a, final MemoryPort b)
    {
        a.peer = b;
        b.peer = a;
    }

    @Override
    public String name()
    {
        return name;
    }

    /**
     * @return the largest frame this port accepts.
     */
    public int maxFrameLength()
    {
        return maxFrameLength;
    }

    @Override
    public int receive(final FrameHandler handler, final int limit)
    {
        final long lost = inboundLost.get();
        if (lost != inboundLostCounted)
        {
            counters.add(PortCounters.RX_DROPPED, lost - inboundLostCounted);
            inboundLostCounted = lost;
        }
        if (closed || limit <= 0)
        {
            return 0;
        }

        currentHandler = handler;
        try
        {
            return inbound.read(inboundReader, limit);
        }
        finally
        {
            currentHandler = null;
        }
    }

    @Override
    public int tryClaim(final int length)
    {
        claimLength = 0;
        if (length <= 0 || length > maxFrameLength || closed)
        {
            counters.add(PortCounters.TX_ERRORS, 1);
            return -1;
        }
        if (txQueued == txLengths.length)
        {
            counters.add(PortCounters.TX_RING_FULL, 1);
            return -1;
        }
        claimLength = length;
        return txQueued * maxFrameLength;
    }

    @Override
    public MutableDirectBuffer claimBuffer()
    {
        return txSlots;
    }

    @Override
    public void commit()
    {
        if (claimLength == 0)
        {
            throw new IllegalStateException("commit without a claim on " + name);
        }
        txLengths[txQueued++] = claimLength;
        claimLength = 0;
    }

    @Override
    public int flush()
    {
        final int queued = txQueued;
        final MemoryPort destination = peer;
        int flushed = 0;
        for (int i = 0; i < queued; i++)
        {
            final int length = txLengths[i];
            final int slotOffset = i * maxFrameLength;
            if (null != destination)
            {
                // On a wire the frame leaves this port whatever happens at the far end, like a real link.
                if (destination.inbound.write(FLAGS_TYPE_BIAS, txSlots, slotOffset, length))
                {
                    destination.inboundWaiting.incrementAndGet();
                }
                else
                {
                    destination.inboundLost.incrementAndGet();
                }
                counters.onFrameTransmitted(length);
                flushed++;
            }
            else if (outbound.write(FLAGS_TYPE_BIAS, txSlots, slotOffset, length))
            {
                counters.onFrameTransmitted(length);
                flushed++;
            }
            else
            {
                counters.add(PortCounters.TX_ERRORS, 1);
            }
        }
        txQueued = 0;
        return flushed;
    }

    @Override
    public PortCounters counters()
    {
        return counters;
    }

    /**
     * @return frames queued by {@link #send} and not yet flushed.
     */
    public int queuedForSend()
    {
        return txQueued;
    }

    /**
     * Queue a copy of a frame for {@link #receive}. Safe to call from any thread.
     *
     * @return false if the inbound queue is full or the frame is larger than {@link #maxFrameLength()}.
     */
    public boolean inject(final byte[] frame)
    {
        return inject(frame, 0);
    }

    /**
     * Queue a copy of a frame for {@link #receive}, to be delivered with the given {@code FrameHandler.FLAG_*}s.
     */
    public boolean inject(final byte[] frame, final int flags)
    {
        return inject(new UnsafeBuffer(frame), 0, frame.length, flags);
    }

    /**
     * Queue a copy of {@code length} bytes at {@code offset} for {@link #receive}. Safe to call from any thread.
     */
    public boolean inject(final DirectBuffer buffer, final int offset, final int length, final int flags)
    {
        if (flags < 0)
        {
            throw new IllegalArgumentException("flags must not be negative: " + flags);
        }
        if (length <= 0 || length > maxFrameLength)
        {
            return false;
        }
        if (inbound.write(flags + FLAGS_TYPE_BIAS, buffer, offset, length))
        {
            inboundWaiting.incrementAndGet();
            return true;
        }
        return false;
    }

    /**
     * @return frames of the largest length the inbound queue holds.
     */
    @Override
    public int receiveCapacity()
    {
        return inbound.capacity() / (maxFrameLength + RecordDescriptor.HEADER_LENGTH);
    }

    /**
     * @return whether at least {@code frames} frames were queued and not yet received.
     */
    @Override
    public boolean receiveBacklogAtLeast(final int frames)
    {
        return frames >= 1 && inboundWaiting.get() >= frames;
    }

    /**
     * Take every flushed frame of an unwired port, oldest first, as fresh arrays. Call from one thread at a time.
     */
    public List<byte[]> drainSent()
    {
        final List<byte[]> frames = new ArrayList<>();
        outbound.read((type, buffer, index, length) ->
        {
            final byte[] frame = new byte[length];
            buffer.getBytes(index, frame);
            frames.add(frame);
        });
        return frames;
    }

    /**
     * Stop receiving and sending; queued frames are discarded. Idempotent.
     */
    @Override
    public void close()
    {
        closed = true;
        txQueued = 0;
    }

    private void onInboundRecord(final int type, final MutableDirectBuffer buffer, final int index, final int length)
    {
        inboundWaiting.decrementAndGet();
        counters.onFrameReceived(length);
        currentHandler.onFrame(buffer, index, length, type - FLAGS_TYPE_BIAS);
    }

    @Override
    public String toString()
    {
        return "MemoryPort{" + name + ", " + counters + '}';
    }
}
