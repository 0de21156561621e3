package io.netreduce.controlplane.config;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import static org.assertj.core.api.Assertions.assertThat;

class ElementTypeTest
{
    @ParameterizedTest
    @EnumSource(ElementType.class)
    void shouldMapToTheDataplaneTypeOfTheSameNameAndSize(final ElementType type)
    {
        assertThat(type.dataplaneType().name()).isEqualTo(type.name());
        assertThat(type.sizeBytes()).isEqualTo(type.dataplaneType().size());
        assertThat(type.configName()).isEqualTo(type.dataplaneType().cliName());
        assertThat(ElementType.fromConfigName(type.configName())).isSameAs(type);
    }
}
