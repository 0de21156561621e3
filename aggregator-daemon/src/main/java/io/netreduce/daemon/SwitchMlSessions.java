package io.netreduce.daemon;

import io.netreduce.controlplane.config.Ipv4Cidr;
import io.netreduce.controlplane.config.SwitchMlApplianceConfig;
import io.netreduce.dataplane.switchml.SwitchMlJobDefinition;
import io.netreduce.switchml.controller.PacketSizeCode;
import io.netreduce.switchml.controller.SessionRefusedException;
import io.netreduce.switchml.controller.UdpSessionReply;
import io.netreduce.switchml.controller.UdpSessionRequest;
import io.netreduce.switchml.controller.UdpSessions;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.net.Inet4Address;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * SwitchML sessions opened through the controller, as p4app-switchML's controller opens them: rank 0's request
 * clears the session (its job removed), every rank then registers its MAC and address, and the registration of the
 * last of {@code num_workers} installs the session's job ({@code session-<id>}) on the dataplane with the
 * appliance's session pool size and the packet size the request names ({@link PacketSizeCode}: the published
 * client's 64 and 256 elements, ours up to 2048). The client asks in that order (rank 0 before
 * a barrier the others wait on, and a barrier after every registration before its first packet), so the job is in
 * place before any packet.
 * <p>
 * Who may: only hosts in {@code appliance.switchml.controller.allow}, and a worker registers its own address only
 * (the caller's address must be the one it registers) unless the caller is the appliance's own host. A session
 * whose workers are another job's (a configured one) is refused; one whose workers belong to an older session
 * replaces it (a job run again by the same hosts).
 */
final class SwitchMlSessions implements UdpSessions
{
    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);

    private final DataplaneSwitchMl jobs;
    private final List<Ipv4Cidr> allow;
    private final int poolSize;
    private long openSession;
    private Registration[] registrations;

    private record Registration(long mac, int ip)
    {
    }

    SwitchMlSessions(final DataplaneSwitchMl jobs, final SwitchMlApplianceConfig config)
    {
        this.jobs = jobs;
        this.allow = config.allow().stream().map(Ipv4Cidr::parse).toList();
        this.poolSize = config.sessionPoolSize();
    }

    static String jobName(final long sessionId)
    {
        return "session-" + Long.toHexString(sessionId);
    }

    @Override
    public synchronized UdpSessionReply open(final UdpSessionRequest request) throws SessionRefusedException
    {
        checkCaller(request);
        if (request.numWorkers() < 1 || request.numWorkers() > SwitchMlJobDefinition.MAX_WORKERS ||
            request.rank() < 0 || request.rank() >= request.numWorkers())
        {
            throw new SessionRefusedException("rank " + request.rank() + " of " + request.numWorkers() +
                " workers: ranks are 0..W-1, W at most " + SwitchMlJobDefinition.MAX_WORKERS);
        }
        if (request.packetSizeCode() < 0 || request.packetSizeCode() > PacketSizeCode.MAX)
        {
            throw new SessionRefusedException("packet size code " + request.packetSizeCode() + " is not 0.." +
                PacketSizeCode.MAX + " (32 << code elements per packet)");
        }
        final int elements = PacketSizeCode.elementsOf(request.packetSizeCode());
        final String name = jobName(request.sessionId());
        if (request.rank() == 0)
        {
            // Rank 0 comes first: whatever this session had is cleared.
            jobs.remove(name);
            openSession = request.sessionId();
            registrations = new Registration[request.numWorkers()];
            LOG.info("SwitchML session {}: opened by rank 0 ({}) for {} workers, {} elements per packet", name,
                ip(request.ipv4()), request.numWorkers(), elements);
        }
        else if (registrations == null || openSession != request.sessionId() ||
            registrations.length != request.numWorkers())
        {
            throw new SessionRefusedException("session " + Long.toHexString(request.sessionId()) + ": rank " +
                request.rank() + " before rank 0 opened it (or for another number of workers)");
        }
        registrations[request.rank()] = new Registration(request.mac(), request.ipv4());
        for (final Registration registration : registrations)
        {
            if (registration == null)
            {
                return reply();
            }
        }
        install(name, elements);
        return reply();
    }

    private void install(final String name, final int elements) throws SessionRefusedException
    {
        final List<SwitchMlJobDefinition.Worker> workers = new ArrayList<>();
        final List<String> addresses = new ArrayList<>();
        final Set<Integer> ips = new HashSet<>();
        for (final Registration registration : registrations)
        {
            if (!ips.add(registration.ip()))
            {
                throw new SessionRefusedException("session " + name + ": two ranks registered " +
                    ip(registration.ip()) + " (the appliance tells workers apart by address)");
            }
            workers.add(new SwitchMlJobDefinition.Worker(registration.ip(), registration.mac()));
            addresses.add(ip(registration.ip()));
        }
        // Older sessions of these workers are over: their hosts have started another.
        for (final DataplaneSwitchMl.Installed job : jobs.installed().values())
        {
            if (job.workers().stream().anyMatch(addresses::contains))
            {
                if (!DataplaneSwitchMl.ORIGIN_CONTROLLER.equals(job.origin()))
                {
                    registrations = null;
                    throw new SessionRefusedException("session " + name + ": workers " + addresses + " overlap " +
                        "job " + job.name() + " of the configuration");
                }
                LOG.info("SwitchML session {} replaces {} (same workers)", name, job.name());
                jobs.remove(job.name());
            }
        }
        try
        {
            jobs.install(name, DataplaneSwitchMl.ORIGIN_CONTROLLER, workers, addresses, elements, poolSize);
        }
        catch (final IllegalArgumentException | IllegalStateException ex)
        {
            throw new SessionRefusedException(ex.getMessage());
        }
        finally
        {
            registrations = null;
        }
    }

    private UdpSessionReply reply()
    {
        return new UdpSessionReply(jobs.applianceMac(), jobs.applianceIp());
    }

    private void checkCaller(final UdpSessionRequest request) throws SessionRefusedException
    {
        final InetSocketAddress peer = request.peer();
        if (peer == null || !(peer.getAddress() instanceof Inet4Address address))
        {
            throw new SessionRefusedException("the caller's IPv4 address is unknown");
        }
        final int caller = Ipv4Cidr.toInt(address);
        if (allow.stream().noneMatch(network -> network.contains(caller)))
        {
            throw new SessionRefusedException("caller " + address.getHostAddress() + " is not in " +
                "appliance.switchml.controller.allow " + allow);
        }
        if (caller != request.ipv4() && !address.isLoopbackAddress())
        {
            throw new SessionRefusedException("caller " + address.getHostAddress() + " registers " +
                ip(request.ipv4()) + ": a worker registers its own address");
        }
    }

    private static String ip(final int ip)
    {
        return String.format(Locale.ROOT, "%d.%d.%d.%d", ip >>> 24, ip >>> 16 & 0xFF, ip >>> 8 & 0xFF, ip & 0xFF);
    }
}
