package io.netreduce.controlplane.api;

/**
 * A capture and how far it got.
 *
 * @param id          the capture id, for stopping it.
 * @param port        the port captured (or, for drops, the port whose drops are captured), or null for drops of
 *                    every port.
 * @param drops       whether it captures dropped frames.
 * @param file        the pcap file.
 * @param packets     frames written so far.
 * @param running     whether it is still capturing.
 * @param lost        frames not captured because the writer fell behind (the capture ring was full).
 * @param maxPackets  the capture stops after this many frames; 0 for no limit.
 * @param reasonsFile for a drop capture, the text file giving each frame's drop reason; null otherwise.
 * @param error       why the capture ended early (e.g. the disk is full), or null.
 */
public record CaptureInfo(
    String id,
    String port,
    boolean drops,
    String file,
    long packets,
    boolean running,
    long lost,
    long maxPackets,
    String reasonsFile,
    String error)
{
}
