package io.netreduce.controlplane.api;

/**
 * A request to capture frames to a pcap file.
 *
 * @param port       the port to capture; with {@code drops}, only drops of frames received on it (null: any port).
 * @param drops      true to capture the frames the dataplane drops instead of every frame received.
 * @param file       the pcap file to write, inside the capture directory (a relative path is resolved against it);
 *                   it must not exist yet.
 * @param maxPackets stop after this many frames; 0 for no limit.
 */
public record CaptureRequest(String port, boolean drops, String file, long maxPackets)
{
}
