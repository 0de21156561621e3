package io.netreduce.protocol.element;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class ElementTypeTest
{
    @ParameterizedTest
    @EnumSource(ElementType.class)
    void shouldParseItsOwnCliName(final ElementType type)
    {
        assertThat(ElementType.parse(type.cliName())).isSameAs(type);
        assertThat(ElementType.parse(type.cliName().toUpperCase())).isSameAs(type);
    }

    @ParameterizedTest
    @CsvSource({ "float32,FP32", "float,FP32", "float16,FP16", "half,FP16", "bfloat16,BF16", "int,INT32" })
    void shouldParseAliases(final String text, final ElementType expected)
    {
        assertThat(ElementType.parse(text)).isSameAs(expected);
    }

    @Test
    void shouldRejectAnUnknownNameListingTheAcceptedOnes()
    {
        assertThatThrownBy(() -> ElementType.parse("fp64"))
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessage("element type must be fp32, fp16, bf16 or int32: fp64");
    }

    @Test
    void shouldGiveTheElementSizes()
    {
        assertThat(ElementType.FP32.size()).isEqualTo(4);
        assertThat(ElementType.FP16.size()).isEqualTo(2);
        assertThat(ElementType.BF16.size()).isEqualTo(2);
        assertThat(ElementType.INT32.size()).isEqualTo(4);
    }
}
