package io.netreduce.controlplane.config;

import com.fasterxml.jackson.databind.JsonNode;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import static io.netreduce.controlplane.config.ErrorCollector.child;
import static io.netreduce.controlplane.config.ErrorCollector.index;

/**
 * Reads the SwitchML parts of a configuration ({@code appliance.switchml}, {@code jobs[].switchml}) with
 * {@link ConfigReader}'s error reporting: every structural problem with its path, placeholders so reading goes on.
 * {@link SwitchMlValidator} checks values.
 */
final class SwitchMlConfigReader
{
    private static final Set<String> APPLIANCE_KEYS = Set.of("mac", "ip", "controller", "sessionPoolSize");
    private static final Set<String> CONTROLLER_KEYS = Set.of("listen", "allow");
    private static final Set<String> JOB_KEYS = Set.of("elementsPerPacket", "poolSize", "workers");
    private static final Set<String> WORKER_KEYS = Set.of("rank", "ip", "mac");

    private final ConfigReader reader;
    private final ErrorCollector errors;

    SwitchMlConfigReader(final ConfigReader reader, final ErrorCollector errors)
    {
        this.reader = reader;
        this.errors = errors;
    }

    SwitchMlApplianceConfig readAppliance(final JsonNode node, final String path)
    {
        if (!reader.isObject(node, path, "a mapping with keys mac, ip, controller and sessionPoolSize"))
        {
            return null;
        }
        reader.checkKeys(node, path, APPLIANCE_KEYS);
        final String mac = reader.string(reader.required(node, path, "mac"), child(path, "mac"), null);
        final String ip = reader.string(reader.required(node, path, "ip"), child(path, "ip"), null);
        String listen = null;
        final List<String> allow = new ArrayList<>();
        final JsonNode controller = node.get("controller");
        final String controllerPath = child(path, "controller");
        if (controller != null && reader.isObject(controller, controllerPath, "a mapping with keys listen and allow"))
        {
            reader.checkKeys(controller, controllerPath, CONTROLLER_KEYS);
            listen = reader.string(reader.required(controller, controllerPath, "listen"),
                child(controllerPath, "listen"), null);
            final JsonNode allowNode = controller.get("allow");
            final String allowPath = child(controllerPath, "allow");
            if (allowNode != null && reader.isArray(allowNode, allowPath))
            {
                for (int i = 0; i < allowNode.size(); i++)
                {
                    allow.add(reader.string(allowNode.get(i), index(allowPath, i), ""));
                }
            }
        }
        final int poolSize = reader.integer(node.get("sessionPoolSize"), child(path, "sessionPoolSize"),
            SwitchMlApplianceConfig.DEFAULT_SESSION_POOL_SIZE);
        return new SwitchMlApplianceConfig(mac, ip, listen, allow, poolSize);
    }

    SwitchMlJobConfig readJob(final JsonNode node, final String path)
    {
        if (!reader.isObject(node, path, "a mapping with keys elementsPerPacket, poolSize and workers"))
        {
            return new SwitchMlJobConfig(0, 0, List.of());
        }
        reader.checkKeys(node, path, JOB_KEYS);
        final int elements = reader.integer(node.get("elementsPerPacket"), child(path, "elementsPerPacket"),
            SwitchMlJobConfig.DEFAULT_ELEMENTS_PER_PACKET);
        final int poolSize = reader.integer(node.get("poolSize"), child(path, "poolSize"),
            SwitchMlJobConfig.DEFAULT_POOL_SIZE);
        final List<SwitchMlJobConfig.Worker> workers = new ArrayList<>();
        final JsonNode workersNode = reader.required(node, path, "workers");
        final String workersPath = child(path, "workers");
        if (workersNode != null && reader.isArray(workersNode, workersPath))
        {
            for (int i = 0; i < workersNode.size(); i++)
            {
                final String workerPath = index(workersPath, i);
                final JsonNode worker = workersNode.get(i);
                if (reader.isObject(worker, workerPath, "a worker mapping with keys rank, ip and mac"))
                {
                    reader.checkKeys(worker, workerPath, WORKER_KEYS);
                    workers.add(new SwitchMlJobConfig.Worker(
                        reader.integer(reader.required(worker, workerPath, "rank"), child(workerPath, "rank"), -1),
                        reader.string(reader.required(worker, workerPath, "ip"), child(workerPath, "ip"), null),
                        reader.string(worker.get("mac"), child(workerPath, "mac"), null)));
                }
                else
                {
                    // Keep the index aligned with the document so later paths name the right element.
                    workers.add(new SwitchMlJobConfig.Worker(-1, null, null));
                }
            }
        }
        return new SwitchMlJobConfig(elements, poolSize, workers);
    }
}
