package io.netreduce.controlplane.api;

/**
 * A request to capture frames to a pcap file.
 *
 * @param port       the port to capture, or null to capture dropped frames.
 * @param drops      true to capture the frames the dataplane drops (with any port) instead of all frames.
 * @param file       the pcap file to write.
 * @param maxPackets stop after this many frames; 0 for no limit.
 */
public record CaptureRequest(String port, boolean drops, String file, long maxPackets)
{
}
