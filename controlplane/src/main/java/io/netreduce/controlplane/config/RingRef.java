package io.netreduce.controlplane.config;

/**
 * A ring together with the job it belongs to.
 *
 * @param job  the job name.
 * @param ring the ring.
 */
public record RingRef(String job, RingConfig ring)
{
}
