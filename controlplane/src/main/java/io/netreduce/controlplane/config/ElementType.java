package io.netreduce.controlplane.config;

import com.fasterxml.jackson.annotation.JsonValue;

/**
 * The type of the vector elements a ring sums, as named in the YAML configuration and the API. The dataplane adds
 * element by element, so the payload of every packet must hold a whole number of elements.
 * <p>
 * Each constant maps to the dataplane's {@link io.netreduce.protocol.element.ElementType}, which owns the element
 * sizes; this enum only adds the configuration spelling, so the loader's names and error messages stay its own.
 */
public enum ElementType
{
    FP32("fp32", io.netreduce.protocol.element.ElementType.FP32),
    FP16("fp16", io.netreduce.protocol.element.ElementType.FP16),
    BF16("bf16", io.netreduce.protocol.element.ElementType.BF16),
    INT32("int32", io.netreduce.protocol.element.ElementType.INT32);

    private final String configName;
    private final io.netreduce.protocol.element.ElementType dataplaneType;

    ElementType(final String configName, final io.netreduce.protocol.element.ElementType dataplaneType)
    {
        this.configName = configName;
        this.dataplaneType = dataplaneType;
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
        return dataplaneType.size();
    }

    /**
     * @return the dataplane's element type that a ring configured with this type sums.
     */
    public io.netreduce.protocol.element.ElementType dataplaneType()
    {
        return dataplaneType;
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
