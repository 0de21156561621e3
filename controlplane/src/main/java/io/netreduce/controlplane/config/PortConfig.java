package io.netreduce.controlplane.config;

import java.util.Objects;

/**
 * An appliance port: a network interface the dataplane attaches to.
 *
 * @param name the interface name, e.g. {@code eth1}.
 * @param mtu  the interface MTU in bytes (IP MTU, without the Ethernet header).
 * @param type the kind of socket opened on it; {@link PortType#AF_PACKET} unless configured.
 * @param segmentationOffload af_packet only: send runs of result packets to one worker as one UDP segmentation
 *             offload frame, which the interface cuts into packets (a NIC with USO in hardware, the kernel
 *             otherwise), and split such frames arriving (veth passes them whole) back into packets. Off unless
 *             configured.
 */
public record PortConfig(String name, int mtu, PortType type, boolean segmentationOffload)
{
    /** Segmentation offload unless configured: off. */
    public static final boolean DEFAULT_SEGMENTATION_OFFLOAD = false;
    /** MTU assumed when the configuration does not give one. */
    public static final int DEFAULT_MTU = 1500;
    /** Smallest MTU accepted: the IPv4 minimum datagram size every host must accept. */
    public static final int MIN_MTU = 576;
    /** Largest MTU accepted: common jumbo-frame limit. */
    public static final int MAX_MTU = 9216;
    /** Port type assumed when the configuration does not give one. */
    public static final PortType DEFAULT_TYPE = PortType.AF_PACKET;

    public PortConfig
    {
        Objects.requireNonNull(type, "type");
    }

    /**
     * A port of the {@link #DEFAULT_TYPE default type}.
     */
    public PortConfig(final String name, final int mtu)
    {
        this(name, mtu, DEFAULT_TYPE, DEFAULT_SEGMENTATION_OFFLOAD);
    }

    /**
     * A port of {@code type}, segmentation offload as by default.
     */
    public PortConfig(final String name, final int mtu, final PortType type)
    {
        this(name, mtu, type, DEFAULT_SEGMENTATION_OFFLOAD);
    }
}
