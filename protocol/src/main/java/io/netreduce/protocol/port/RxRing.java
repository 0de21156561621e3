package io.netreduce.protocol.port;

/**
 * The receive side of a PACKET_MMAP ring as {@link AfPacketPort} uses it, whatever its layout: frames delivered
 * oldest first, at most a batch limit per call, handed back to the kernel once the handler has seen them.
 * Single-threaded, allocation-free.
 */
interface RxRing
{
    /**
     * Deliver up to {@code limit} frames, oldest first.
     *
     * @return frames delivered.
     */
    int read(FrameHandler handler, int limit);

    /**
     * @return true if {@link #read} would find frames (or, for V3, an empty block to hand back) without waiting.
     */
    boolean hasWork();

    /**
     * @return frames the ring holds at most (V3: blocks times the frames of {@code slotSize} that fit a block).
     */
    int capacity();

    /**
     * @return whether at least {@code frames} frames wait to be read (one volatile read; V3 counts whole blocks).
     */
    boolean backlogAtLeast(int frames);
}
