package io.netreduce.worker.sidecar;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.util.Iterator;
import java.util.Map;

/**
 * The sidecar's request protocol: one JSON object per line from the trainer, one JSON reply per request, in order.
 * See {@code docs/python.md}. Every malformed request gets {@code {"ok":false,"error":...}} naming the field.
 * <p>
 * Read and written with jackson-core's streaming parser and generator into and out of databind's tree nodes, not
 * through an {@code ObjectMapper}: making the first ObjectMapper (its date formats, locales, time zones and type
 * factory) cost the sidecar about 0.2 CPU-s at its first request, the {@code open} every Session waits for, four or
 * eight sidecars at once on two cores (docs/performance.md, "Start-up and the first calls"). The trees are the ones
 * {@code ObjectMapper.readTree} would make: ints, longs and big integers as such, other numbers as doubles, the last
 * of a repeated name winning, anything after the first value ignored.
 */
final class Requests
{
    /** Queued in place of a line longer than {@link ControlChannel#MAX_LINE}. */
    static final String TOO_LONG = "\u0000too long";

    private static final JsonFactory JSON = new JsonFactory();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

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
        try (JsonParser parser = JSON.createParser(line))
        {
            final JsonToken first = parser.nextToken();
            node = first == null ? null : value(parser, first);
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
        return NODES.objectNode().put("ok", true);
    }

    static String error(final String message)
    {
        return text(NODES.objectNode().put("ok", false).put("error", message));
    }

    /**
     * @return {@code reply} as one line of JSON (what {@code toString()} would give, without an ObjectMapper).
     */
    static String text(final JsonNode reply)
    {
        final StringWriter out = new StringWriter(128);
        try (JsonGenerator generator = JSON.createGenerator(out))
        {
            write(generator, reply);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex); // a StringWriter does not fail
        }
        return out.toString();
    }

    /** The value that starts at {@code token}, as a tree. */
    private static JsonNode value(final JsonParser parser, final JsonToken token) throws IOException
    {
        return switch (token)
        {
            case START_OBJECT ->
            {
                final ObjectNode object = NODES.objectNode();
                while (parser.nextToken() == JsonToken.FIELD_NAME)
                {
                    final String name = parser.currentName();
                    object.set(name, value(parser, parser.nextToken()));
                }
                yield object;
            }
            case START_ARRAY ->
            {
                final ArrayNode array = NODES.arrayNode();
                JsonToken next;
                while ((next = parser.nextToken()) != JsonToken.END_ARRAY)
                {
                    array.add(value(parser, next));
                }
                yield array;
            }
            case VALUE_STRING -> NODES.textNode(parser.getText());
            case VALUE_NUMBER_INT -> switch (parser.getNumberType())
            {
                case INT -> NODES.numberNode(parser.getIntValue());
                case LONG -> NODES.numberNode(parser.getLongValue());
                default -> NODES.numberNode(parser.getBigIntegerValue());
            };
            case VALUE_NUMBER_FLOAT -> NODES.numberNode(parser.getDoubleValue());
            case VALUE_TRUE -> NODES.booleanNode(true);
            case VALUE_FALSE -> NODES.booleanNode(false);
            case VALUE_NULL -> NODES.nullNode();
            default -> throw new IOException("unexpected " + token);
        };
    }

    private static void write(final JsonGenerator generator, final JsonNode node) throws IOException
    {
        switch (node.getNodeType())
        {
            case OBJECT ->
            {
                generator.writeStartObject();
                for (final Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); )
                {
                    final Map.Entry<String, JsonNode> field = it.next();
                    generator.writeFieldName(field.getKey());
                    write(generator, field.getValue());
                }
                generator.writeEndObject();
            }
            case ARRAY ->
            {
                generator.writeStartArray();
                for (final JsonNode element : node)
                {
                    write(generator, element);
                }
                generator.writeEndArray();
            }
            case STRING -> generator.writeString(node.textValue());
            case NUMBER ->
            {
                switch (node.numberType())
                {
                    case INT -> generator.writeNumber(node.intValue());
                    case LONG -> generator.writeNumber(node.longValue());
                    case BIG_INTEGER -> generator.writeNumber(node.bigIntegerValue());
                    case BIG_DECIMAL -> generator.writeNumber(node.decimalValue());
                    case FLOAT -> generator.writeNumber(node.floatValue());
                    default -> generator.writeNumber(node.doubleValue());
                }
            }
            case BOOLEAN -> generator.writeBoolean(node.booleanValue());
            default -> generator.writeNull();
        }
    }

}
