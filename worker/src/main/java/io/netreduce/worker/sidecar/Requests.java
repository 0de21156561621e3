package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

/**
 * The sidecar's request protocol: one JSON object per line from the trainer, one JSON reply per request, in order.
 * See {@code docs/python.md}. Every malformed request gets {@code {"ok":false,"error":...}} naming the field.
 */
final class Requests
{
    /** Queued in place of a line longer than {@link ControlChannel#MAX_LINE}. */
    static final String TOO_LONG = "\u0000too long";

    static final ObjectMapper JSON = new ObjectMapper();

    private Requests()
    {
    }

    /**
     * @throws IllegalArgumentException if the line is not a JSON object with an "op".
     */
    static JsonNode parse(final String line)
    {
        if (TOO_LONG.equals(line))
        {
            throw new IllegalArgumentException("request longer than " + ControlChannel.MAX_LINE + " bytes");
        }
        final JsonNode node;
        try
        {
            node = JSON.readTree(line);
        }
        catch (final Exception ex)
        {
            throw new IllegalArgumentException("request is not JSON: " + ex.getMessage().lines().findFirst().orElse(""));
        }
        if (node == null || !node.isObject() || !node.path("op").isTextual())
        {
            throw new IllegalArgumentException("request must be a JSON object with a string \"op\"");
        }
        return node;
    }

    static int intField(final JsonNode request, final String name)
    {
        final JsonNode value = request.get(name);
        if (value == null || !value.canConvertToInt() || !value.isIntegralNumber())
        {
            throw new IllegalArgumentException("\"" + name + "\" must be an integer");
        }
        return value.intValue();
    }

    static long longField(final JsonNode request, final String name, final long fallback)
    {
        final JsonNode value = request.get(name);
        if (value == null)
        {
            return fallback;
        }
        if (!value.isIntegralNumber() || !value.canConvertToLong())
        {
            throw new IllegalArgumentException("\"" + name + "\" must be an integer");
        }
        return value.longValue();
    }

    static boolean booleanField(final JsonNode request, final String name, final boolean fallback)
    {
        final JsonNode value = request.get(name);
        if (value == null)
        {
            return fallback;
        }
        if (!value.isBoolean())
        {
            throw new IllegalArgumentException("\"" + name + "\" must be true or false");
        }
        return value.booleanValue();
    }

    static double doubleField(final JsonNode request, final String name, final double fallback)
    {
        final JsonNode value = request.get(name);
        if (value == null)
        {
            return fallback;
        }
        if (!value.isNumber())
        {
            throw new IllegalArgumentException("\"" + name + "\" must be a number");
        }
        return value.doubleValue();
    }

    static String textField(final JsonNode request, final String name, final String fallback)
    {
        final JsonNode value = request.get(name);
        if (value == null)
        {
            if (fallback == null)
            {
                throw new IllegalArgumentException("\"" + name + "\" is required");
            }
            return fallback;
        }
        if (!value.isTextual())
        {
            throw new IllegalArgumentException("\"" + name + "\" must be a string");
        }
        return value.textValue();
    }

    static ObjectNode ok()
    {
        return JSON.createObjectNode().put("ok", true);
    }

    static String error(final String message)
    {
        return JSON.createObjectNode().put("ok", false).put("error", message).toString();
    }

}
