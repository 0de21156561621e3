package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static io.netreduce.protocol.port.LinuxPacketAbi.MSG_DONTWAIT;
import static io.netreduce.protocol.port.XdpAbi.*;

/**
 * The receive side of an {@link AfXdpPort}: the RX ring, whose descriptors point at frames the kernel wrote into
 * receive chunks of the UMEM, and the fill ring, on which those chunks go back to the kernel. Each frame is handed
 * to the handler straight from the UMEM, and its chunk is put back on the fill ring once the handler has run.
 * <p>
 * A multi-buffer frame's pieces are not contiguous (each chunk keeps its headroom), so it is copied into a
 * preallocated scratch buffer and handed over from there; a frame longer than the scratch buffer is counted as
 * truncated and dropped. Owning thread only; allocation-free.
 */
final class XdpReceiver
{
    private final int fd;
    private final MemorySegment errnoState;
    private final XdpRing rx;
    private final XdpRing fill;
    private final UnsafeBuffer umem;
    private final long chunkMask;
    private final PortCounters counters;

    /** Multi-buffer frames are reassembled here; its capacity is the longest frame accepted. */
    private final UnsafeBuffer scratch;
    private int scratchLength;
    private boolean assembling;
    private boolean discarding;

    private int rxConsumer;
    private int fillProducer;

    /**
     * @param fd           the AF_XDP socket, kicked when the kernel asks for it.
     * @param errnoState   where the kick captures errno (the port's).
     * @param fillProducer the fill ring's producer index as set up: every receive chunk already with the kernel.
     * @param arena        where the scratch buffer lives: as long as the port.
     */
    XdpReceiver(
        final int fd,
        final MemorySegment errnoState,
        final XdpRing rx,
        final XdpRing fill,
        final int fillProducer,
        final UnsafeBuffer umem,
        final XdpUmemLayout layout,
        final Arena arena,
        final PortCounters counters)
    {
        this.fd = fd;
        this.errnoState = errnoState;
        this.rx = rx;
        this.fill = fill;
        this.fillProducer = fillProducer;
        this.umem = umem;
        this.chunkMask = ~((long)layout.chunkSize() - 1);
        this.counters = counters;
        final int maxFrameLength = layout.maxFrameLength();
        this.scratch = new UnsafeBuffer(arena.allocate(maxFrameLength, 64).address(), maxFrameLength);
    }

    /**
     * Deliver up to {@code limit} frames, oldest first, and give their chunks back to the kernel.
     *
     * @return frames delivered.
     */
    int read(final FrameHandler handler, final int limit)
    {
        int consumer = rxConsumer;
        final int available = rx.producer() - consumer;
        if (available == 0)
        {
            if (fill.needsWakeup())
            {
                // Zero-copy drivers stop receiving when they found the fill ring empty until woken by a system
                // call (copy mode never sets this flag on the fill ring).
                Libc.recvKick(errnoState, fd, MSG_DONTWAIT);
            }
            return 0;
        }
        final int end = consumer + available;
        final UnsafeBuffer rxMemory = rx.memory();
        final UnsafeBuffer fillMemory = fill.memory();
        final UnsafeBuffer umem = this.umem;
        int fillIndex = fillProducer;
        int frames = 0;
        while (consumer != end && frames < limit)
        {
            final int entry = rx.entryOffset(consumer);
            final long address = rxMemory.getLong(entry + DESC_ADDR_OFFSET);
            final int length = rxMemory.getInt(entry + DESC_LEN_OFFSET);
            final boolean more = (rxMemory.getInt(entry + DESC_OPTIONS_OFFSET) & XDP_PKT_CONTD) != 0;
            consumer++;

            if (!assembling && !more)
            {
                counters.onFrameReceived(length);
                handler.onFrame(umem, (int)address, length, 0);
                frames++;
            }
            else
            {
                frames += assemble(handler, umem, (int)address, length, more);
            }
            // The chunk goes back to the kernel only when the fill producer is published, after the handler ran.
            fillMemory.putLong(fill.entryOffset(fillIndex++), address & chunkMask);
        }
        rxConsumer = consumer;
        rx.publishConsumer(consumer);
        fillProducer = fillIndex;
        fill.publishProducer(fillIndex);
        if (fill.needsWakeup())
        {
            Libc.recvKick(errnoState, fd, MSG_DONTWAIT);
        }
        return frames;
    }

    /**
     * @return descriptors the RX ring holds at most.
     */
    int capacity()
    {
        return rx.size();
    }

    /**
     * @return whether at least {@code frames} descriptors wait in the RX ring (no system call).
     */
    boolean backlogAtLeast(final int frames)
    {
        return frames >= 1 && rx.producer() - rxConsumer >= frames;
    }

    /**
     * @return whether the RX ring holds descriptors not yet read (no system call).
     */
    boolean hasWork()
    {
        return rx.producer() != rxConsumer;
    }

    /**
     * One piece of a multi-buffer frame into the scratch buffer; hands the frame over after its last piece.
     *
     * @return 1 if a frame was delivered, else 0.
     */
    private int assemble(
        final FrameHandler handler, final UnsafeBuffer umem, final int address, final int length, final boolean more)
    {
        if (!assembling)
        {
            assembling = true;
            discarding = false;
            scratchLength = 0;
        }
        if (!discarding)
        {
            if (scratchLength + length > scratch.capacity())
            {
                discarding = true;
            }
            else
            {
                scratch.putBytes(scratchLength, umem, address, length);
                scratchLength += length;
            }
        }
        if (more)
        {
            return 0;
        }
        assembling = false;
        if (discarding)
        {
            counters.add(PortCounters.RX_TRUNCATED, 1);
            return 0;
        }
        counters.onFrameReceived(scratchLength);
        handler.onFrame(scratch, 0, scratchLength, 0);
        return 1;
    }

    /**
     * Stray use after close must fail in Java, not touch freed memory.
     */
    void close()
    {
        scratch.wrap(new byte[0]);
    }
}
