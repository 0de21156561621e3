package io.netreduce.protocol.element;

import java.util.Locale;

/**
 * The element type of a ring's gradient data, as it lies in the RDMA payload and in host memory (little-endian:
 * the NIC copies host memory byte for byte). One enum serves the appliance's rings and the host's tensors, so the
 * two cannot disagree on sizes or names.
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

    /**
     * Parse a command-line spelling of an element type.
     *
     * @param text fp32, fp16, bf16 or int32 (any case; float32/float, float16/half, bfloat16 and int are accepted
     *             as aliases).
     * @return the element type.
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

    /**
     * The strict spelling used in the YAML configuration and the control API: exactly a {@link #cliName()}.
     *
     * @return the element type, or null if {@code name} is not one of fp32, fp16, bf16, int32.
     */
    public static ElementType fromCliName(final String name)
    {
        for (final ElementType type : values())
        {
            if (type.cliName().equals(name))
            {
                return type;
            }
        }
        return null;
    }

    /**
     * @return the lower-case name used on command lines and in reports, e.g. {@code bf16}; {@link #parse} accepts
     * it.
     */
    public String cliName()
    {
        return name().toLowerCase(Locale.ROOT);
    }
}
