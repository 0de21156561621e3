package io.netreduce.host.allreduce;

import java.util.Locale;

/**
 * Element type of a tensor, as it lies in memory and on the wire: little-endian, like the host memory an RDMA NIC
 * copies byte for byte. Matches the appliance's element types (the ring's {@code elementType}).
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

    /**
     * @param text fp32, fp16, bf16 or int32 (any case).
     * @throws IllegalArgumentException naming the accepted values.
     */
    public static ElementType parse(final String text)
    {
        return switch (text.toLowerCase(Locale.ROOT))
        {
            case "fp32", "float32", "float" -> FP32;
            case "fp16", "float16", "half" -> FP16;
            case "bf16", "bfloat16" -> BF16;
            case "int32", "int" -> INT32;
            default -> throw new IllegalArgumentException("element type must be fp32, fp16, bf16 or int32: " + text);
        };
    }

    public String cliName()
    {
        return name().toLowerCase(Locale.ROOT);
    }
}
