package io.netreduce.daemon;

import io.netreduce.controlplane.api.SwitchMlJobStatus;
import io.netreduce.controlplane.config.Addresses;
import io.netreduce.controlplane.config.Ipv4Cidr;
import io.netreduce.controlplane.config.SwitchMlApplianceConfig;
import io.netreduce.controlplane.config.SwitchMlJobConfig;
import io.netreduce.dataplane.switchml.SwitchMlJobDefinition;
import io.netreduce.dataplane.switchml.SwitchMlJobView;
import io.netreduce.protocol.wire.EthernetHeader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static io.netreduce.daemon.CommandReplies.await;

/**
 * The daemon's SwitchML jobs: those declared in the configuration and those opened through the controller
 * ({@link SwitchMlSessions}), each given a free dataplane id and installed on lane 0 with the appliance's SwitchML
 * address. Keeps each job's name, origin and workers for the API, {@code ctl switchml} and the metrics.
 * <p>
 * Thread-safe by its monitor: the control thread (configuration, reloads) and the controller's gRPC threads
 * (sessions) both change jobs; none of it is on the packet path.
 */
final class DataplaneSwitchMl
{
    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);
    static final String ORIGIN_CONFIG = "config";
    static final String ORIGIN_CONTROLLER = "controller";

    /**
     * A job as installed.
     *
     * @param workers the workers' addresses (dotted), by rank.
     */
    record Installed(String name, int id, String origin, List<String> workers, SwitchMlJobDefinition definition)
    {
    }

    private final LaneRunners lanes;
    private final Map<String, Installed> jobs = new LinkedHashMap<>();
    private SwitchMlApplianceConfig appliance;
    private long applianceMac;
    private int applianceIp;

    DataplaneSwitchMl(final LaneRunners lanes)
    {
        this.lanes = lanes;
    }

    /**
     * @param switchml the appliance's SwitchML address, or null if it serves none.
     */
    synchronized void configure(final SwitchMlApplianceConfig switchml)
    {
        appliance = switchml;
        if (switchml != null)
        {
            applianceMac = EthernetHeader.parseMac(switchml.mac());
            applianceIp = Ipv4Cidr.toInt(Addresses.parseIpLiteral(switchml.ip()));
        }
    }

    synchronized SwitchMlApplianceConfig appliance()
    {
        return appliance;
    }

    synchronized long applianceMac()
    {
        return applianceMac;
    }

    synchronized int applianceIp()
    {
        return applianceIp;
    }

    /**
     * Install a job of the configuration.
     */
    synchronized void installConfigured(final String name, final SwitchMlJobConfig job)
    {
        final List<SwitchMlJobDefinition.Worker> workers = new ArrayList<>();
        final List<String> addresses = new ArrayList<>();
        final SwitchMlJobConfig.Worker[] byRank = new SwitchMlJobConfig.Worker[job.workers().size()];
        job.workers().forEach(worker -> byRank[worker.rank()] = worker);
        for (final SwitchMlJobConfig.Worker worker : byRank)
        {
            workers.add(new SwitchMlJobDefinition.Worker(Ipv4Cidr.toInt(Addresses.parseIpLiteral(worker.ip())),
                worker.mac() == null ? SwitchMlJobDefinition.ANY_MAC : EthernetHeader.parseMac(worker.mac())));
            addresses.add(worker.ip());
        }
        install(name, ORIGIN_CONFIG, workers, addresses, job.elementsPerPacket(), job.poolSize());
    }

    /**
     * Install a job under {@code name} with the next free id.
     *
     * @throws IllegalArgumentException if the dataplane refuses it (a worker in another job, the memory budget),
     *                                  or no id is free.
     */
    synchronized Installed install(
        final String name, final String origin, final List<SwitchMlJobDefinition.Worker> workers,
        final List<String> addresses, final int elementsPerPacket, final int poolSize)
    {
        if (appliance == null)
        {
            throw new IllegalArgumentException("SwitchML job " + name + ": the appliance has no SwitchML address " +
                "(appliance.switchml)");
        }
        final int id = freeId();
        final SwitchMlJobDefinition definition =
            new SwitchMlJobDefinition(id, workers, elementsPerPacket, poolSize, applianceMac, applianceIp);
        final SwitchMlJobView view = await(lanes.proxy().installSwitchMlJob(definition), "install SwitchML job " + name);
        final Installed installed = new Installed(name, id, origin, List.copyOf(addresses), definition);
        jobs.put(name, installed);
        LOG.info("SwitchML job {} installed as id {} ({}): {} workers {}, {} elements per packet, pool of {} slots, " +
            "{} bytes", name, id, origin, workers.size(), addresses, elementsPerPacket, poolSize, view.memoryBytes());
        return installed;
    }

    /**
     * Remove a job; nothing if there is none of that name.
     */
    synchronized void remove(final String name)
    {
        final Installed installed = jobs.remove(name);
        if (installed == null)
        {
            return;
        }
        final SwitchMlJobView view =
            await(lanes.proxy().removeSwitchMlJob(installed.id()), "remove SwitchML job " + name);
        LOG.info("SwitchML job {} (id {}) removed after {} completions, {} results resent", name, installed.id(),
            view.completions(), view.resultsResent());
    }

    synchronized Map<String, Installed> installed()
    {
        return new LinkedHashMap<>(jobs);
    }

    /**
     * @return the jobs with their dataplane figures, in installation order.
     */
    List<SwitchMlJobStatus> statuses()
    {
        final Map<String, Installed> snapshot = installed();
        if (snapshot.isEmpty())
        {
            return List.of();
        }
        final Map<Integer, SwitchMlJobView> views = new LinkedHashMap<>();
        for (final SwitchMlJobView view : await(lanes.proxy().switchMlJobs(), "list SwitchML jobs"))
        {
            views.put(view.job(), view);
        }
        final List<SwitchMlJobStatus> statuses = new ArrayList<>();
        for (final Installed job : snapshot.values())
        {
            final SwitchMlJobView v = views.get(job.id());
            if (v != null)
            {
                statuses.add(new SwitchMlJobStatus(job.name(), job.id(), job.origin(), job.workers(),
                    v.elementsPerPacket(), v.poolSize(), v.memoryBytes(), v.setsInFlight(), v.packets(),
                    v.completions(), v.resultsSent(), v.resultsResent(), v.pendingDrops(), v.notMemberDrops(),
                    v.wrongSizeDrops(), v.badPoolIndexDrops()));
            }
        }
        return statuses;
    }

    private int freeId()
    {
        final boolean[] taken = new boolean[256];
        jobs.values().forEach(job -> taken[job.id()] = true);
        for (int id = 0; id < taken.length; id++)
        {
            if (!taken[id])
            {
                return id;
            }
        }
        throw new IllegalArgumentException("256 SwitchML jobs are installed; remove one first");
    }
}
