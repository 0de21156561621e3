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
        final String text;
        try
        {
            text = Files.readString(file);
        }
        catch (final IOException ex)
        {
            throw new ConfigException(List.of(new ConfigError("", "cannot read " + file + ": " + ex)));
        }
        return parse(text, options);
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

    private static JsonNode readTree(final String text) throws ConfigException
    {
        final JsonNode root;
        try
        {
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
        if (root == null || root.isMissingNode() || root.isNull())
        {
            throw new ConfigException(List.of(new ConfigError("", "the configuration is empty")));
        }
        return root;
    }
}
