package io.netreduce.controlplane.config;

import com.fasterxml.jackson.annotation.JsonValue;

/**
 * Which kind of socket the dataplane opens on a port.
 */
public enum PortType
{
    /** AF_PACKET with PACKET_MMAP rings: any interface, no program attached. The default. */
    AF_PACKET("af_packet"),
    /**
     * AF_XDP: an XDP program shipped with the daemon, attached at start and detached at exit, redirects the port's
     * queue 0 into a UMEM shared with the daemon; zero-copy where the driver offers it, copy otherwise (veth).
     */
    AF_XDP("af_xdp");

    private final String configName;

    PortType(final String configName)
    {
        this.configName = configName;
    }

    /**
     * @return the name used in the YAML configuration.
     */
    @JsonValue
    public String configName()
    {
        return configName;
    }

    /**
     * @param name the configuration name, e.g. {@code af_xdp}.
     * @return the type or null if the name is not one.
     */
    public static PortType fromConfigName(final String name)
    {
        for (final PortType type : values())
        {
            if (type.configName.equals(name))
            {
                return type;
            }
        }
        return null;
    }
}
