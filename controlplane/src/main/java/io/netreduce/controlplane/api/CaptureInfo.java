package io.netreduce.controlplane.api;

/**
 * A capture and how far it got.
 *
 * @param id      the capture id, for stopping it.
 * @param port    the port captured, or null for drops.
 * @param drops   whether it captures dropped frames.
 * @param file    the pcap file.
 * @param packets frames written so far.
 * @param running whether it is still capturing.
 */
public record CaptureInfo(String id, String port, boolean drops, String file, long packets, boolean running)
{
}
