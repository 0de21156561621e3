package io.netreduce.controlplane.api;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.module.SimpleModule;
import com.fasterxml.jackson.databind.ser.std.ToStringSerializerBase;
import io.netreduce.protocol.element.ElementType;
import com.fasterxml.jackson.databind.json.JsonMapper;
import io.netreduce.controlplane.config.ConfigError;
import io.netreduce.controlplane.config.ConfigException;
import io.netreduce.controlplane.config.ConfigLoader;
import io.netreduce.controlplane.config.JobConfig;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The control API's routes: JSON over HTTP, versioned under {@code /v1}, written against {@link ApplianceControl}.
 * <pre>
 * GET    /v1/health                 liveness
 * GET    /v1/jobs                   list jobs
 * POST   /v1/jobs                   add a job (YAML or JSON body of one job)
 * GET    /v1/jobs/{name}            show a job
 * DELETE /v1/jobs/{name}            remove a job
 * GET    /v1/rings                  list rings
 * GET    /v1/rings/{id}             show a ring
 * GET    /v1/rings/{id}/occupancy   oldest incomplete aggregators and their missing ranks
 * GET    /v1/tables/clt             connection lookup table
 * GET    /v1/tables/ctt             connection translation table (multi-rack rings)
 * GET    /v1/counters               counters
 * GET    /v1/latency                latency percentiles
 * POST   /v1/reload                 reload the configuration file
 * GET    /v1/captures               list captures
 * POST   /v1/captures               start a capture (JSON body: port, drops, file, maxPackets)
 * DELETE /v1/captures/{id}          stop a capture
 * </pre>
 * Errors are {@code {"error": "..."}} (plus {@code "errors": [{path, message}]} for configuration errors) with
 * 400 bad body or refused request (e.g. a capture file outside the capture directory), 404 unknown
 * path/job/ring/capture, 405 wrong method (with Allow), 409 duplicate job or conflicting capture,
 * 501 not available without a dataplane.
 */
public final class ControlApi implements RequestHandler
{
    /**
     * The JSON mapper used for responses; nulls are left out, element types are written as configured (fp32).
     */
    public static final ObjectMapper JSON = JsonMapper.builder()
        .serializationInclusion(JsonInclude.Include.NON_NULL)
        .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
        .addModule(new SimpleModule("netreduce-element-type")
            .addSerializer(ElementType.class, new ToStringSerializerBase(ElementType.class)
            {
                @Override
                public String valueToString(final Object value)
                {
                    return ((ElementType)value).cliName();
                }
            }))
        .build();

    private final ApplianceControl control;

    /**
     * @param control the appliance the API controls.
     */
    public ControlApi(final ApplianceControl control)
    {
        this.control = control;
    }

    /**
     * The counters as one JSON object keyed by Prometheus series, each {@code {value, description, metric,
     * labels}}: stable keys for scripts, the sentence for people.
     */
    private static Map<String, Object> countersByKey(final List<CounterValue> counters)
    {
        final Map<String, Object> byKey = new LinkedHashMap<>();
        for (final CounterValue counter : counters)
        {
            final Map<String, Object> entry = new LinkedHashMap<>();
            entry.put("value", counter.value());
            entry.put("description", counter.description());
            entry.put("metric", counter.metric());
            entry.put("labels", counter.labels());
            byKey.put(counter.key(), entry);
        }
        return byKey;
    }

    @Override
    public HttpResponseData handle(final HttpRequestData request)
    {
        final String[] segments = segments(request.path());
        if (segments.length < 2 || !"v1".equals(segments[0]))
        {
            return error(404, "no such endpoint: " + request.path());
        }
        try
        {
            return route(request, segments);
        }
        catch (final ConfigException ex)
        {
            return configErrors(ex.errors());
        }
        catch (final NotFoundException ex)
        {
            return error(404, ex.getMessage());
        }
        catch (final ConflictException ex)
        {
            return error(409, ex.getMessage());
        }
        catch (final BadRequestException ex)
        {
            return error(400, ex.getMessage());
        }
        catch (final UnsupportedOperationException ex)
        {
            return error(501, "not available: " + ex.getMessage());
        }
    }

    private HttpResponseData route(final HttpRequestData request, final String[] s) throws ConfigException
    {
        final String method = request.method();
        final String resource = s[1];
        switch (resource)
        {
            case "health":
                if (s.length == 2)
                {
                    return only(method, "GET", () -> ok(Map.of("status", "ok")));
                }
                break;
            case "jobs":
                if (s.length == 2)
                {
                    return switch (method)
                    {
                        case "GET" -> ok(control.listJobs());
                        case "POST" -> addJob(request.body());
                        default -> notAllowed("GET, POST");
                    };
                }
                if (s.length == 3)
                {
                    final String name = s[2];
                    return switch (method)
                    {
                        case "GET" -> control.job(name).map(this::ok)
                            .orElseGet(() -> error(404, "no job '" + name + "'"));
                        case "DELETE" -> ok(control.removeJob(name));
                        default -> notAllowed("GET, DELETE");
                    };
                }
                break;
            case "rings":
                if (s.length == 2)
                {
                    return only(method, "GET", () -> ok(control.rings()));
                }
                final Integer ringId = ringId(s[2]);
                if (ringId == null)
                {
                    return error(400, "ring id '" + s[2] + "' is not a number in 0..255");
                }
                if (s.length == 3)
                {
                    return only(method, "GET", () -> control.ring(ringId).map(this::ok)
                        .orElseGet(() -> error(404, "no ring " + ringId)));
                }
                if (s.length == 4 && "parameters".equals(s[3]))
                {
                    return only(method, "GET", () -> control.ring(ringId)
                        .map(status -> ok(RingParameters.of(status.ring())))
                        .orElseGet(() -> error(404, "no ring " + ringId)));
                }
                if (s.length == 4 && "occupancy".equals(s[3]))
                {
                    return only(method, "GET", () -> ok(control.occupancy(ringId)));
                }
                break;
            case "tables":
                if (s.length == 3 && "clt".equals(s[2]))
                {
                    return only(method, "GET", () -> ok(control.clt()));
                }
                if (s.length == 3 && "ctt".equals(s[2]))
                {
                    return only(method, "GET", () -> ok(control.ctt()));
                }
                break;
            case "switchml":
                if (s.length == 2)
                {
                    return only(method, "GET", () -> ok(control.switchMlJobs()));
                }
                break;
            case "counters":
                if (s.length == 2)
                {
                    return only(method, "GET", () -> ok(countersByKey(control.counters())));
                }
                break;
            case "latency":
                if (s.length == 2)
                {
                    return only(method, "GET", () -> ok(control.latency()));
                }
                break;
            case "reload":
                if (s.length == 2)
                {
                    if (!"POST".equals(method))
                    {
                        return notAllowed("POST");
                    }
                    return ok(control.reload());
                }
                break;
            case "captures":
                if (s.length == 2)
                {
                    return switch (method)
                    {
                        case "GET" -> ok(control.captures());
                        case "POST" -> startCapture(request.body());
                        default -> notAllowed("GET, POST");
                    };
                }
                if (s.length == 3)
                {
                    final String id = s[2];
                    return only(method, "DELETE", () -> ok(control.stopCapture(id)));
                }
                break;
            default:
                break;
        }
        return error(404, "no such endpoint: " + request.path());
    }

    private HttpResponseData addJob(final String body) throws ConfigException
    {
        if (body.isBlank())
        {
            return error(400, "the body must be one job in YAML or JSON: {name: ..., rings: [...]}");
        }
        final JobConfig job = ConfigLoader.parseJob(body);
        return json(201, control.addJob(job));
    }

    private HttpResponseData startCapture(final String body)
    {
        final CaptureRequest request;
        try
        {
            request = JSON.readValue(body, CaptureRequest.class);
        }
        catch (final JsonProcessingException ex)
        {
            return error(400, "bad capture request: " + ex.getOriginalMessage());
        }
        if (request == null || request.file() == null || request.file().isBlank())
        {
            return error(400, "bad capture request: 'file' is required");
        }
        if (request.port() == null && !request.drops())
        {
            return error(400, "bad capture request: give a 'port' or set 'drops' to true");
        }
        if (request.maxPackets() < 0)
        {
            return error(400, "bad capture request: 'maxPackets' must be >= 0 (0: no limit)");
        }
        return json(201, control.startCapture(request));
    }

    private static Integer ringId(final String text)
    {
        try
        {
            final int id = Integer.parseInt(text);
            return id >= 0 && id <= 255 ? id : null;
        }
        catch (final NumberFormatException ex)
        {
            return null;
        }
    }

    private static String[] segments(final String path)
    {
        final String trimmed = path.startsWith("/") ? path.substring(1) : path;
        final String withoutSlash = trimmed.endsWith("/") ? trimmed.substring(0, trimmed.length() - 1) : trimmed;
        return withoutSlash.isEmpty() ? new String[0] : withoutSlash.split("/", -1);
    }

    private interface Answer
    {
        HttpResponseData get();
    }

    private static HttpResponseData only(final String method, final String allowed, final Answer answer)
    {
        return allowed.equals(method) ? answer.get() : notAllowed(allowed);
    }

    private HttpResponseData ok(final Object value)
    {
        return json(200, value);
    }

    private static HttpResponseData json(final int status, final Object value)
    {
        try
        {
            return HttpResponseData.json(status, JSON.writeValueAsString(value));
        }
        catch (final JsonProcessingException ex)
        {
            throw new IllegalStateException("cannot serialise " + value.getClass().getSimpleName(), ex);
        }
    }

    private static HttpResponseData error(final int status, final String message)
    {
        return json(status, Map.of("error", message));
    }

    private static HttpResponseData notAllowed(final String allowed)
    {
        final HttpResponseData body = error(405, "method not allowed; use " + allowed);
        return new HttpResponseData(405, body.contentType(), body.body(), Map.of("Allow", allowed));
    }

    private static HttpResponseData configErrors(final List<ConfigError> errors)
    {
        final Map<String, Object> body = new LinkedHashMap<>();
        body.put("error", errors.size() == 1 ? "1 configuration error" : errors.size() + " configuration errors");
        body.put("errors", errors);
        return json(400, body);
    }
}
