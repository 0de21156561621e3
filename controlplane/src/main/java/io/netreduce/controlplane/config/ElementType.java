package io.netreduce.controlplane.config;

import com.fasterxml.jackson.annotation.JsonValue;

/**
 * The type of the vector elements a ring sums. The dataplane adds element by element, so the payload of every
 * packet must hold a whole number of elements.
 */
public enum ElementType
{
    FP32("fp32", 4),
    FP16("fp16", 2),
    BF16("bf16", 2),
    INT32("int32", 4);

    private final String configName;
    private final int sizeBytes;

    ElementType(final String configName, final int sizeBytes)
    {
        this.configName = configName;
        this.sizeBytes = sizeBytes;
    }

    /**
     * @return the name used in the YAML configuration and the API.
     */
    @JsonValue
    public String configName()
    {
        return configName;
    }

    /**
     * @return the size of one element in bytes.
     */
    public int sizeBytes()
    {
        return sizeBytes;
    }

    /**
     * @param name the configuration name, e.g. {@code fp32}.
     * @return the element type or null if the name is not one.
     */
    public static ElementType fromConfigName(final String name)
    {
        for (final ElementType type : values())
        {
            if (type.configName.equals(name))
            {
                return type;
            }
        }
        return null;
    }
}
