package io.netreduce.controlplane.config;

import io.netreduce.dataplane.switchml.SwitchMlJobDefinition;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import static io.netreduce.controlplane.config.ConfigRules.range;
import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Checks of the SwitchML parts of a configuration: the appliance's SwitchML address and controller, each SwitchML
 * job's pool and workers, and what spans jobs (a worker address belongs to one SwitchML job only, since the
 * appliance finds a packet's job by its source address).
 */
final class SwitchMlValidator
{
    private final ErrorCollector errors;

    SwitchMlValidator(final ErrorCollector errors)
    {
        this.errors = errors;
    }

    void checkAppliance(final SwitchMlApplianceConfig switchml, final String path)
    {
        if (switchml == null)
        {
            return;
        }
        checkMac(switchml.mac(), child(path, "mac"), "the appliance's SwitchML MAC");
        final String ipPath = child(path, "ip");
        if (switchml.ip() != null && !isUnicastIpv4(switchml.ip()))
        {
            errors.add(ipPath, "'" + switchml.ip() + "' is not a unicast IPv4 address (SwitchML speaks IPv4)");
        }
        final String controllerPath = child(path, "controller");
        if (switchml.controller() != null)
        {
            final String listenPath = child(controllerPath, "listen");
            try
            {
                if (ListenAddress.parse(switchml.controller()).isUnix())
                {
                    errors.add(listenPath, "the controller's clients are on other hosts: give host:port, not a " +
                        "Unix socket");
                }
            }
            catch (final IllegalArgumentException ex)
            {
                errors.add(listenPath, ex.getMessage());
            }
            final String allowPath = child(controllerPath, "allow");
            if (switchml.allow().isEmpty())
            {
                errors.add(allowPath, "name the networks whose hosts may open SwitchML sessions (e.g. " +
                    "[10.77.0.0/24]): a session replaces the slot state of its workers' earlier one");
            }
            for (int i = 0; i < switchml.allow().size(); i++)
            {
                try
                {
                    Ipv4Cidr.parse(switchml.allow().get(i));
                }
                catch (final IllegalArgumentException ex)
                {
                    errors.add(index(allowPath, i), ex.getMessage());
                }
            }
        }
        range(errors, switchml.sessionPoolSize(), 1, SwitchMlJobDefinition.MAX_POOL_SIZE,
            child(path, "sessionPoolSize"));
    }

    /**
     * @param workerJobs worker address to the path of the job that has it, filled across jobs.
     */
    void checkJob(final JobConfig job, final String path, final ApplianceConfig appliance,
        final Map<InetAddress, String> workerJobs)
    {
        final SwitchMlJobConfig switchml = job.switchml();
        final String switchMlPath = child(path, "switchml");
        if (!job.rings().isEmpty())
        {
            errors.add(child(path, "rings"), "a job is either NetReduce rings or a SwitchML job, not both: make two " +
                "jobs");
        }
        if (appliance.switchml() == null)
        {
            errors.add(switchMlPath, "a SwitchML job needs appliance.switchml (the MAC and IPv4 address the " +
                "appliance answers SwitchML workers from)");
        }
        final int elements = switchml.elementsPerPacket();
        if (elements < 2 || elements > SwitchMlJobDefinition.MAX_ELEMENTS || (elements & 1) != 0)
        {
            errors.add(child(switchMlPath, "elementsPerPacket"), elements + " is not an even number from 2 to " +
                SwitchMlJobDefinition.MAX_ELEMENTS + " (the published client sends 64 or 256)");
        }
        range(errors, switchml.poolSize(), 1, SwitchMlJobDefinition.MAX_POOL_SIZE, child(switchMlPath, "poolSize"));
        checkWorkers(switchml.workers(), child(switchMlPath, "workers"), workerJobs, path);
    }

    private void checkWorkers(final List<SwitchMlJobConfig.Worker> workers, final String path,
        final Map<InetAddress, String> workerJobs, final String jobPath)
    {
        if (workers.isEmpty() || workers.size() > SwitchMlJobDefinition.MAX_WORKERS)
        {
            errors.add(path, "a SwitchML job needs 1.." + SwitchMlJobDefinition.MAX_WORKERS + " workers, has " +
                workers.size());
        }
        final Map<Integer, String> ranks = new HashMap<>();
        for (int i = 0; i < workers.size(); i++)
        {
            final SwitchMlJobConfig.Worker worker = workers.get(i);
            final String workerPath = index(path, i);
            final String rankPath = child(workerPath, "rank");
            if (worker.rank() < 0 || worker.rank() >= workers.size())
            {
                errors.add(rankPath, "rank " + worker.rank() + " is not in 0.." + (workers.size() - 1));
            }
            else
            {
                final String other = ranks.putIfAbsent(worker.rank(), rankPath);
                if (other != null)
                {
                    errors.add(rankPath, "rank " + worker.rank() + " is also " + other);
                }
            }
            final String ipPath = child(workerPath, "ip");
            if (worker.ip() != null && !errors.hasErrorAt(ipPath))
            {
                if (!isUnicastIpv4(worker.ip()))
                {
                    errors.add(ipPath, "'" + worker.ip() + "' is not a unicast IPv4 address");
                }
                else
                {
                    final String other = workerJobs.putIfAbsent(Addresses.parseIpLiteral(worker.ip()), ipPath);
                    if (other != null)
                    {
                        errors.add(ipPath, worker.ip() + " is also " + other + " (the appliance finds a SwitchML " +
                            "packet's job and worker by its source address)");
                    }
                }
            }
            if (worker.mac() != null)
            {
                checkMac(worker.mac(), child(workerPath, "mac"), "a worker's MAC");
            }
        }
    }

    private void checkMac(final String mac, final String path, final String what)
    {
        if (mac == null || errors.hasErrorAt(path))
        {
            return;
        }
        if (!Addresses.isMac(mac))
        {
            errors.add(path, "'" + mac + "' is not a MAC address like 02:77:00:00:00:fe");
        }
        else if ((Integer.parseInt(mac.substring(0, 2), 16) & 1) != 0)
        {
            errors.add(path, "'" + mac + "' is a group address; " + what + " must be unicast");
        }
    }

    static boolean isUnicastIpv4(final String text)
    {
        final InetAddress address = Addresses.parseIpLiteral(text);
        return address instanceof Inet4Address && !address.isMulticastAddress() && !address.isAnyLocalAddress() &&
            !text.equals("255.255.255.255");
    }
}
