package io.netreduce.controlplane.config;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.dataformat.yaml.YAMLMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Loads a netreduce configuration from YAML (or JSON, which YAML includes) and validates it. Either the whole
 * configuration is valid and returned, or a {@link ConfigException} lists every error with its path.
 */
public final class ConfigLoader
{
    private static final YAMLMapper YAML = YAMLMapper.builder()
        .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
        .build();

    /**
     * Largest configuration file: a real one is kilobytes; the cap keeps {@code --config /dev/zero} (or any
     * endless stream) from filling the heap before a line is parsed.
     */
    public static final int MAX_CONFIG_BYTES = 4 << 20;

    /**
     * Integers YAML 1.1 reads in another base or with separators: {@code 020} (octal 16), {@code 0x10},
     * {@code 0o20}, {@code 0b10000}, {@code 1_000}, {@code 1:20} (base 60). In a configuration they are typos.
     */
    private static final java.util.regex.Pattern NOT_PLAIN_DECIMAL =
        java.util.regex.Pattern.compile("[+-]?(0[0-9_]+|0[xXoObB].*|.*_.*|.*:.*)");

    private ConfigLoader()
    {
    }

    /**
     * Load and validate a configuration file (document checks only).
     *
     * @param file the YAML file.
     * @return the valid configuration.
     * @throws ConfigException listing every error.
     */
    public static NetreduceConfig load(final Path file) throws ConfigException
    {
        return load(file, ValidationOptions.DOCUMENT_ONLY);
    }

    /**
     * Load and validate a configuration file.
     *
     * @param file    the YAML file.
     * @param options host-dependent checks to run.
     * @return the valid configuration.
     * @throws ConfigException listing every error.
     */
    public static NetreduceConfig load(final Path file, final ValidationOptions options) throws ConfigException
    {
        return parse(readText(file, "a netreduce configuration"), options);
    }

    /**
     * A configuration's text (or a job's, for {@code ctl add-job}) from a file: at most {@link #MAX_CONFIG_BYTES}
     * read, so that an endless stream is refused rather than read, and checked to be UTF-8.
     *
     * @param file the file.
     * @param what what it should be, for the error about a file too large ("a netreduce configuration").
     * @return its text.
     * @throws ConfigException one error, at no path: the file cannot be read (not there), is too large, or is not
     * UTF-8 (line and column named).
     */
    public static String readText(final Path file, final String what) throws ConfigException
    {
        final byte[] bytes;
        try (java.io.InputStream in = Files.newInputStream(file))
        {
            bytes = in.readNBytes(MAX_CONFIG_BYTES + 1);
        }
        catch (final java.nio.file.NoSuchFileException ex)
        {
            throw new ConfigException(List.of(new ConfigError("", "cannot read " + file + ": no such file")));
        }
        catch (final IOException ex)
        {
            throw new ConfigException(List.of(new ConfigError("", "cannot read " + file + ": " + ex)));
        }
        if (bytes.length > MAX_CONFIG_BYTES)
        {
            throw new ConfigException(List.of(new ConfigError("", file + " is larger than " +
                (MAX_CONFIG_BYTES >> 20) + " MiB: not " + what)));
        }
        return decodeUtf8(file, bytes);
    }

    /**
     * Parse and validate configuration text (document checks only).
     *
     * @param text YAML or JSON.
     * @return the valid configuration.
     * @throws ConfigException listing every error.
     */
    public static NetreduceConfig parse(final String text) throws ConfigException
    {
        return parse(text, ValidationOptions.DOCUMENT_ONLY);
    }

    /**
     * Parse and validate configuration text.
     *
     * @param text    YAML or JSON.
     * @param options host-dependent checks to run.
     * @return the valid configuration.
     * @throws ConfigException listing every error.
     */
    public static NetreduceConfig parse(final String text, final ValidationOptions options) throws ConfigException
    {
        final JsonNode root = readTree(text);
        final ErrorCollector errors = new ErrorCollector();
        final NetreduceConfig config = new ConfigReader(errors).readConfig(root);
        if (config != null)
        {
            new ConfigValidator(options, errors).check(config);
        }
        if (!errors.isEmpty())
        {
            throw new ConfigException(errors.errors());
        }
        return config;
    }

    /**
     * Parse one job, as the control API receives it. Checks what can be checked of a job alone (paths are relative
     * to the job, e.g. {@code rings[0].members[1].ip}); ring-id uniqueness and the memory budget are checked when
     * the job is merged into the running configuration.
     *
     * @param text YAML or JSON of one job: {@code {name: ..., rings: [...]}}.
     * @return the job.
     * @throws ConfigException listing every error.
     */
    public static JobConfig parseJob(final String text) throws ConfigException
    {
        final JsonNode root = readTree(text);
        final ErrorCollector errors = new ErrorCollector();
        final JobConfig job = new ConfigReader(errors).readJob(root, "");
        if (job != null)
        {
            new ConfigValidator(ValidationOptions.DOCUMENT_ONLY, errors).checkJob(job, "");
        }
        if (!errors.isEmpty())
        {
            throw new ConfigException(errors.errors());
        }
        return job;
    }

    /**
     * One pass over the YAML tokens before the tree is built, for what the tree no longer shows: integers written
     * in another base (YAML 1.1 reads {@code window: 020} as 16), and a second document (the tree has only the
     * first; whatever follows would be ignored without a word).
     */
    private static void checkTokens(final String text) throws ConfigException, java.io.IOException
    {
        final List<ConfigError> errors = new java.util.ArrayList<>();
        try (com.fasterxml.jackson.core.JsonParser parser = YAML.createParser(text))
        {
            int depth = 0;
            boolean rootDone = false;
            com.fasterxml.jackson.core.JsonToken token;
            while ((token = parser.nextToken()) != null)
            {
                if (rootDone)
                {
                    final JsonLocation at = parser.currentTokenLocation();
                    errors.add(new ConfigError("", "a second YAML document at line " + at.getLineNr() +
                        ": a configuration is one document (remove the '---' and what follows, or merge it)"));
                    break;
                }
                if (token.isStructStart())
                {
                    depth++;
                }
                else if (token.isStructEnd())
                {
                    depth--;
                }
                else if (token == com.fasterxml.jackson.core.JsonToken.VALUE_NUMBER_INT &&
                    NOT_PLAIN_DECIMAL.matcher(parser.getText()).matches())
                {
                    errors.add(new ConfigError(path(parser), "'" + parser.getText() + "' is read by YAML as " +
                        parser.getNumberValue() + " (another base or a separator): write the decimal number"));
                }
                rootDone = depth == 0;
            }
        }
        if (!errors.isEmpty())
        {
            throw new ConfigException(errors);
        }
    }

    /**
     * @return the current token's path in the configuration's notation, e.g. {@code jobs[0].rings[1].window}.
     */
    private static String path(final com.fasterxml.jackson.core.JsonParser parser)
    {
        final java.util.ArrayDeque<String> parts = new java.util.ArrayDeque<>();
        for (com.fasterxml.jackson.core.JsonStreamContext context = parser.getParsingContext();
            context != null && !context.inRoot(); context = context.getParent())
        {
            parts.push(context.inArray() ? "[" + context.getCurrentIndex() + "]" : "." + context.getCurrentName());
        }
        final String joined = String.join("", parts);
        return joined.startsWith(".") ? joined.substring(1) : joined;
    }

    /**
     * @throws ConfigException naming the line and column of the first byte that is not UTF-8.
     */
    static String decodeUtf8(final Object source, final byte[] bytes) throws ConfigException
    {
        final java.nio.charset.CharsetDecoder decoder = java.nio.charset.StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
            .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT);
        final java.nio.ByteBuffer in = java.nio.ByteBuffer.wrap(bytes);
        final java.nio.CharBuffer out = java.nio.CharBuffer.allocate(bytes.length);
        final java.nio.charset.CoderResult result = decoder.decode(in, out, true);
        if (result.isError())
        {
            final int at = in.position();
            int line = 1;
            int lineStart = 0;
            for (int i = 0; i < at; i++)
            {
                if (bytes[i] == '\n')
                {
                    line++;
                    lineStart = i + 1;
                }
            }
            throw new ConfigException(List.of(new ConfigError("", source + " is not UTF-8: byte 0x" +
                String.format("%02X", bytes[at] & 0xFF) + " at line " + line + ", column " + (at - lineStart + 1))));
        }
        decoder.flush(out);
        return out.flip().toString();
    }

    private static JsonNode readTree(final String text) throws ConfigException
    {
        final JsonNode root;
        try
        {
            checkTokens(text);
            root = YAML.readTree(text);
        }
        catch (final JsonProcessingException ex)
        {
            final JsonLocation location = ex.getLocation();
            final String where = location == null ? "" :
                " at line " + location.getLineNr() + ", column " + location.getColumnNr();
            throw new ConfigException(List.of(new ConfigError("", "not valid YAML" + where + ": " +
                ex.getOriginalMessage())));
        }
        catch (final IOException ex)
        {
            throw new ConfigException(List.of(new ConfigError("", "cannot read the YAML: " + ex.getMessage())));
        }
        if (root == null || root.isMissingNode() || root.isNull())
        {
            throw new ConfigException(List.of(new ConfigError("", "the configuration is empty")));
        }
        return root;
    }
}
