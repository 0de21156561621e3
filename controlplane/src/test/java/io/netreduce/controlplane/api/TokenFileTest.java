package io.netreduce.controlplane.api;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class TokenFileTest
{
    @Test
    void shouldCreateAMissingTokenFileReadableOnlyByItsOwnerWithARandomToken(@TempDir final Path dir) throws Exception
    {
        final Path file = dir.resolve("private/api.token");
        final String token = TokenFile.loadOrCreate(file);

        assertThat(token).matches("[0-9a-f]{64}");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file))).isEqualTo("rw-------");
        assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file.getParent())))
            .isEqualTo("rwx------");
        assertThat(TokenFile.loadOrCreate(file)).as("kept, not made anew").isEqualTo(token);
        assertThat(TokenFile.loadOrCreate(dir.resolve("other.token"))).isNotEqualTo(token);
    }

    @Test
    void shouldRefuseATokenFileOthersCanRead(@TempDir final Path dir) throws Exception
    {
        final Path file = Files.writeString(dir.resolve("api.token"), "0123456789abcdef0123\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-r--r--"));

        assertThatThrownBy(() -> TokenFile.read(file)).isInstanceOf(IOException.class)
            .hasMessageContaining("others could read the token; chmod 600 it");
        assertThatThrownBy(() -> TokenFile.loadOrCreate(file)).isInstanceOf(IOException.class);
    }

    @Test
    void shouldRefuseATokenTooShortToGuessHard(@TempDir final Path dir) throws Exception
    {
        final Path file = Files.writeString(dir.resolve("api.token"), "secret\n");
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));

        assertThatThrownBy(() -> TokenFile.read(file)).isInstanceOf(IOException.class)
            .hasMessageContaining("at least 16 printable characters");
    }
}
