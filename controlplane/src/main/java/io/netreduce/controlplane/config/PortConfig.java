package io.netreduce.controlplane.config;

/**
 * An appliance port: a network interface the dataplane attaches to.
 *
 * @param name the interface name, e.g. {@code eth1}.
 * @param mtu  the interface MTU in bytes (IP MTU, without the Ethernet header).
 */
public record PortConfig(String name, int mtu)
{
    /** MTU assumed when the configuration does not give one. */
    public static final int DEFAULT_MTU = 1500;
    /** Smallest MTU accepted: the IPv4 minimum datagram size every host must accept. */
    public static final int MIN_MTU = 576;
    /** Largest MTU accepted: common jumbo-frame limit. */
    public static final int MAX_MTU = 9216;
}
