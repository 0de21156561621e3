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
 *             otherwise), and split such frames arriving (veth passes them whole) back into packets. Unless
 *             configured: on for af_packet ports ({@link #defaultSegmentationOffload}).
 */
public record PortConfig(String name, int mtu, PortType type, boolean segmentationOffload)
{
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
        this(name, mtu, DEFAULT_TYPE, defaultSegmentationOffload(DEFAULT_TYPE));
    }

    /**
     * A port of {@code type}, segmentation offload as by default.
     */
    public PortConfig(final String name, final int mtu, final PortType type)
    {
        this(name, mtu, type, defaultSegmentationOffload(type));
    }

    /**
     * Segmentation offload unless configured: on for an af_packet port, where it sends each worker's run of result
     * packets with one slot and one copy into the kernel instead of one per packet (measured on the test bed: the
     * appliance's CPU per call down by a third; 64 MiB all-reduces at W = 8 and 1 Gbit/s from 1.15 s to 0.72 s);
     * off for af_xdp, which has no PACKET_VNET_HDR.
     */
    public static boolean defaultSegmentationOffload(final PortType type)
    {
        return type == PortType.AF_PACKET;
    }
}
