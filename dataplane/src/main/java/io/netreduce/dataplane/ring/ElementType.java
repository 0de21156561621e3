package io.netreduce.dataplane.ring;

/**
 * The element type of a ring's gradient data, as it lies in the RDMA payload (little-endian: the NIC copies
 * host memory byte for byte).
 * <p>
 * fp16 and bf16 are widened to fp32, summed in rank order in fp32 and rounded once to nearest-even, so the
 * result does not depend on how the summation is split into packets or on the arrival order.
 */
public enum ElementType
{
    FP32(4),
    FP16(2),
    BF16(2),
    INT32(4);

    private final int size;

    ElementType(final int size)
    {
        this.size = size;
    }

    /**
     * @return bytes per element.
     */
    public int size()
    {
        return size;
    }
}
