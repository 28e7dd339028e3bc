"""A ResNet-style conv stack as NVIDIA's ResNet-50 notebook writes it: modules that override __call__ and call
``super(Cls, self).__init__()``, Conv(bias=False) + BatchNorm + relu, a lambda shortcut, maxpool with padding,
avgpool, Sequential(lambda flatten, Linear), dynamic batch -- against numpy."""

import numpy as np

import tripy_lab as tp

from .weights import randn


class ConvLayer(tp.Module):
    def __init__(self, in_channels, out_channels, kernel_dims, stride=(1, 1), padding=((0, 0), (0, 0)),
                 activation=True):
        super(ConvLayer, self).__init__()  # noqa: UP008 - the notebook's spelling
        self.convolution = tp.Conv(in_channels, out_channels, kernel_dims=kernel_dims, stride=stride,
                                   padding=padding, bias=False)
        self.normalization = tp.BatchNorm(out_channels)
        self.activation = activation

    def __call__(self, x):
        x = self.normalization(self.convolution(x))
        return tp.relu(x) if self.activation else x


class ShortCut(tp.Module):
    def __init__(self, in_channels, out_channels, stride):
        super(ShortCut, self).__init__()  # noqa: UP008 - the notebook's spelling
        self.convolution = tp.Conv(in_channels, out_channels, kernel_dims=(1, 1), stride=stride, bias=False)
        self.normalization = tp.BatchNorm(out_channels)

    def __call__(self, x):
        return self.normalization(self.convolution(x))


class BottleNeck(tp.Module):
    def __init__(self, in_channels, out_channels, bottleneck_channels, stride):
        super(BottleNeck, self).__init__()  # noqa: UP008 - the notebook's spelling
        self.shortcut = (ShortCut(in_channels, out_channels, stride)
                         if in_channels != out_channels or stride != (1, 1) else lambda x: x)
        self.layer = [
            ConvLayer(in_channels, bottleneck_channels, kernel_dims=(1, 1)),
            ConvLayer(bottleneck_channels, bottleneck_channels, kernel_dims=(3, 3), stride=stride,
                      padding=((1, 1), (1, 1))),
            ConvLayer(bottleneck_channels, out_channels, kernel_dims=(1, 1), activation=False),
        ]
        self.activation = tp.relu

    def __call__(self, x):
        identity = self.shortcut(x)
        for layer in self.layer:
            x = layer(x)
        return self.activation(x + identity)


class TinyResNet(tp.Module):
    def __init__(self, num_classes=5):
        super(TinyResNet, self).__init__()  # noqa: UP008 - the notebook's spelling
        self.embedder = ConvLayer(3, 8, kernel_dims=(3, 3), stride=(2, 2), padding=((1, 1), (1, 1)))
        self.stages = [BottleNeck(8, 16, 4, (2, 2)), BottleNeck(16, 16, 4, (1, 1))]
        self.classifier = tp.Sequential(lambda x: tp.flatten(x, start_dim=1), tp.Linear(16, num_classes))

    def __call__(self, x):
        x = self.embedder(x)
        x = tp.maxpool(x, kernel_dims=(3, 3), stride=(2, 2), padding=((1, 1), (1, 1)))
        for stage in self.stages:
            x = stage(x)
        x = tp.avgpool(x, kernel_dims=(2, 2), stride=(2, 2))
        return self.classifier(x)


def _conv(x, w, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, hh, ww = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (hh - kh) // stride + 1, (ww - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    return out


def _bn(x, p, key):
    shape = (1, -1, 1, 1)
    return ((x - p[key + ".running_mean"].reshape(shape)) / np.sqrt(p[key + ".running_var"].reshape(shape) + 1e-5)
            * p[key + ".weight"].reshape(shape) + p[key + ".bias"].reshape(shape))


def _layer(x, p, key, stride=1, pad=0, act=True):
    y = _bn(_conv(x, p[key + ".convolution.weight"], stride, pad), p, key + ".normalization")
    return np.maximum(y, 0) if act else y


def _maxpool(x):
    x = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    oh = (x.shape[2] - 3) // 2 + 1
    return np.stack([np.stack([x[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].max(axis=(2, 3)) for j in range(oh)], -1)
                     for i in range(oh)], -2)


def numpy_resnet(p, x):
    x = _maxpool(_layer(x, p, "embedder", 2, 1))
    for s, stride in ((0, 2), (1, 1)):
        key = f"stages.{s}"
        idt = _bn(_conv(x, p[key + ".shortcut.convolution.weight"], stride, 0), p, key + ".shortcut.normalization") \
            if s == 0 else x
        y = _layer(x, p, key + ".layer.0")
        y = _layer(y, p, key + ".layer.1", stride, 1)
        y = _layer(y, p, key + ".layer.2", act=False)
        x = np.maximum(y + idt, 0)
    n, c, h, w = x.shape
    x = x.reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5)).reshape(n, -1)
    return x @ p["classifier.1.weight"].T + p["classifier.1.bias"]


def test_resnet_style_conv_stack(check_program):
    rng = np.random.default_rng(5)
    model = TinyResNet()
    params = {}
    for key, p in model.state_dict().items():
        a = randn(rng, *p.shape)
        params[key] = np.abs(a) + 0.5 if key.endswith("running_var") else a
    model.load_state_dict({k: tp.Tensor(a) for k, a in params.items()})
    assert "stages.0.shortcut.convolution.weight" in params and "classifier.1.weight" in params
    cases = []
    for n in (1, 3):
        x = randn(rng, n, 3, 16, 16)
        cases.append(((x,), numpy_resnet(params, x)))
    exe = check_program(model, [tp.InputInfo(((1, 2, 4), 3, 16, 16), tp.float32)], cases, rtol=1e-3, atol=1e-3)
    assert list(exe.input_infos) == ["x"]  # the overridden __call__'s parameter name
