"""Built-in model presets, and the contract a user's model function follows.

A model function takes a `ModelSpec` and returns a compiled Keras model:

    def build(spec: ModelSpec) -> keras.Model:
        inputs = keras.Input(spec.input_shape)
        x = keras.layers.Normalization(mean=spec.mean, variance=spec.variance)(inputs)
        outputs = keras.layers.Dense(1)(keras.layers.Flatten()(x))
        model = keras.Model(inputs, outputs)
        model.compile(optimizer="adam", loss="mse", metrics=["mae"])
        return model

It is called inside the distribution strategy's scope, so its variables are mirrored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PRESETS", "ModelSpec", "is_classifier"]


@dataclass(frozen=True)
class ModelSpec:
    """What a model needs to know of its input: shapes, names and feature statistics.

    `input_shape` is (features,) for tabular data or (window length, features) for windows;
    `mean` and `variance` are per feature, over the train split (for a Normalization layer);
    `num_classes` is set for classification (labels 0..num_classes-1), None for regression.
    """

    features: tuple[str, ...]
    label: str
    input_shape: tuple[int, ...]
    mean: list[float]
    variance: list[float]
    num_classes: int | None
    learning_rate: float
    seed: int


def is_classifier(output_shape: Any, num_classes: int | None) -> bool:
    """A model is a classifier when its output has one unit per class (softmax, logits).

    Decided from the model, not from how it was made: a user's classifier and the preset
    are judged alike, and a regression on integer labels (one output unit) stays one.
    """
    units = output_shape[-1] if output_shape else None
    return num_classes is not None and units is not None and units > 1


def _normalized_input(spec: ModelSpec) -> tuple[Any, Any]:
    import keras

    inputs = keras.Input(spec.input_shape, name="features")
    return inputs, keras.layers.Normalization(mean=spec.mean, variance=spec.variance)(inputs)


def tabular_regression(spec: ModelSpec) -> Any:
    """Two hidden layers of 64 and 32 ReLU units, mean squared error."""
    import keras

    inputs, x = _normalized_input(spec)
    init = keras.initializers.GlorotUniform(seed=spec.seed)
    x = keras.layers.Dense(64, activation="relu", kernel_initializer=init)(x)
    x = keras.layers.Dense(32, activation="relu", kernel_initializer=init)(x)
    model = keras.Model(inputs, keras.layers.Dense(1, kernel_initializer=init)(x))
    model.compile(optimizer=keras.optimizers.Adam(spec.learning_rate), loss="mse",
                  metrics=["mae"])
    return model


def tabular_classification(spec: ModelSpec) -> Any:
    """Two hidden layers of 64 and 32 ReLU units, softmax over num_classes."""
    import keras

    inputs, x = _normalized_input(spec)
    init = keras.initializers.GlorotUniform(seed=spec.seed)
    x = keras.layers.Dense(64, activation="relu", kernel_initializer=init)(x)
    x = keras.layers.Dense(32, activation="relu", kernel_initializer=init)(x)
    outputs = keras.layers.Dense(spec.num_classes or 2, activation="softmax",
                                 kernel_initializer=init)(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(spec.learning_rate),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def sequence_forecasting(spec: ModelSpec) -> Any:
    """A 32-unit GRU over the window, then a linear head: the next value of the label."""
    import keras

    if len(spec.input_shape) != 2:
        raise ValueError("the sequence_forecasting preset needs windows: set batching's "
                         "`window: {length: L}`.")
    inputs, x = _normalized_input(spec)
    x = keras.layers.GRU(32, kernel_initializer=keras.initializers.GlorotUniform(seed=spec.seed),
                         recurrent_initializer=keras.initializers.Orthogonal(seed=spec.seed))(x)
    outputs = keras.layers.Dense(
        1, kernel_initializer=keras.initializers.GlorotUniform(seed=spec.seed))(x)
    model = keras.Model(inputs, outputs)
    model.compile(optimizer=keras.optimizers.Adam(spec.learning_rate), loss="mse",
                  metrics=["mae"])
    return model


PRESETS = {
    "tabular_regression": tabular_regression,
    "tabular_classification": tabular_classification,
    "sequence_forecasting": sequence_forecasting,
}
