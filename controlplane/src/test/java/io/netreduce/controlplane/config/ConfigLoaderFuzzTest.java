package io.netreduce.controlplane.config;

import io.netreduce.protocol.fuzz.Mutator;
import io.netreduce.protocol.testing.SeededCases;
import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Fuzzing the configuration loader with mutated copies of the example configurations and the test base: every
 * input either loads or is refused with a {@link ConfigException} whose errors all have a message: no other
 * exception, no hang. The test command runs a short fuzz; {@code scripts/fuzz.sh} a long one.
 */
class ConfigLoaderFuzzTest
{
    @Test
    void shouldEitherLoadOrRefuseWithConfigErrorsWhateverTheBytes() throws Exception
    {
        final List<byte[]> corpus = new ArrayList<>();
        try (var files = Files.list(ConfigLoaderTest.repoRoot().resolve("config")))
        {
            for (final Path file : files.filter(f -> f.toString().endsWith(".yaml")).toList())
            {
                corpus.add(Files.readAllBytes(file));
            }
        }
        corpus.add(ConfigLoaderTest.BASE.getBytes(StandardCharsets.UTF_8));
        final int iterations = Mutator.iterations(2000);
        final Path file = Files.createTempFile("netreduce-fuzz", ".yaml");
        try
        {
            SeededCases.run("config loader fuzz", 1, (random, index) ->
            {
                for (int i = 0; i < iterations; i++)
                {
                    final byte[] input = Mutator.mutate(corpus, random);
                    Files.write(file, input);
                    try
                    {
                        assertThat(ConfigLoader.load(file)).isNotNull();
                    }
                    catch (final ConfigException refused)
                    {
                        assertThat(refused.errors()).isNotEmpty()
                            .allSatisfy(error -> assertThat(error.message()).isNotBlank());
                    }
                }
            });
        }
        finally
        {
            Files.deleteIfExists(file);
        }
    }
}
