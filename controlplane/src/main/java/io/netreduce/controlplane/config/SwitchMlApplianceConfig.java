package io.netreduce.controlplane.config;

import java.util.List;

/**
 * The appliance's SwitchML side ({@code appliance.switchml}): the address it answers SwitchML workers from, and the
 * controller service the published client registers with. Absent: the appliance serves no SwitchML job (SwitchML
 * frames pass through).
 *
 * @param mac             the "switch" MAC results leave from, and the MAC the controller hands the workers.
 * @param ip              the "switch" IPv4 address results leave from; workers address their packets to it.
 * @param controller      where the controller's gRPC service (Session, Sync) listens, as {@code host:port}; null:
 *                        not served (jobs from this file only).
 * @param allow           the networks (CIDR, e.g. {@code 10.77.0.0/24}) whose hosts may open sessions through the
 *                        controller: required when it listens, since a session replaces the slot state of its
 *                        workers' earlier session.
 * @param sessionPoolSize slots of the pool of a job opened through the controller (the Tofino program's 8192 by
 *                        default: the client needs {@code max_outstanding_packets x num_worker_threads}).
 */
public record SwitchMlApplianceConfig(String mac, String ip, String controller, List<String> allow, int sessionPoolSize)
{
    /** The P4 program's {@code num_slots} (register_size / 2). */
    public static final int DEFAULT_SESSION_POOL_SIZE = 8192;

    public SwitchMlApplianceConfig
    {
        allow = List.copyOf(allow);
    }
}
