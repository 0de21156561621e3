package io.netreduce.protocol.port;

/**
 * The next index of a ring of slots, without a branch.
 * <p>
 * Why not {@code i + 1 == count ? 0 : i + 1}: a ring wraps once every {@code count} uses, so when the JIT compiles
 * the per-packet path (after a few thousand frames) the wrapping branch has often not been taken yet, and C2 leaves
 * it out of the compiled code behind an uncommon trap. The first wrap then throws away the whole compiled method it
 * was inlined into (the endpoint's duty cycle, several kilobytes of inlined bytecode: about 0.1 s of C2's time on
 * the 2-core bed) and runs the packet path interpreted until it is compiled again. Seen in the sidecar's
 * {@code -XX:+LogCompilation} as {@code unstable_if} at {@code TpacketV2TxRing.flush}; docs/performance.md,
 * "Start-up and the first calls".
 */
final class RingIndex
{
    private RingIndex()
    {
    }

    /**
     * @param index an index of the ring, {@code 0 <= index < count}
     * @param count the ring's slots, {@code 1 <= count <= 2^30}
     * @return {@code index + 1}, or 0 after the last slot
     */
    static int next(final int index, final int count)
    {
        final int next = index + 1;
        // (next - count) >> 31 is all ones while next < count, zero when next == count
        return next & ((next - count) >> 31);
    }
}
