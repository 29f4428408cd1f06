#pragma once
// Note [Modules with several inputs]
// A layer whose forward takes more than one tensor, optional tensors or plain values, or returns
// several tensors, derives from MultiInputModule<Itself> and writes forward() with whatever
// signature it needs:
//
//   class EncoderLayer : public nn::MultiInputModule<EncoderLayer> {
//    public:
//     Tensor forward(const Tensor& x, const Tensor& mask = Tensor(), bool need_weights = false);
//   };
//   Tensor y = layer(x, mask);          // through the hooks and the call wrapper
//
// layer(args...) is a template (this class is the CRTP base that knows the layer's type), so
// arguments are checked and converted by the compiler as for a direct forward() call. It
// splits the arguments into the Tensors among them, in order, and the plain values, which a
// copy keeps, and hands Module::call (Note [The call path]) the tensors and a function that
// puts them back among the plain values and runs forward(). The results come back as a list of
// tensors and are rebuilt into forward's return type: Tensor, std::pair or std::tuple of
// Tensors, or std::vector<Tensor>. An optional tensor is a Tensor() left undefined, as
// everywhere in ember.
//
// A one-tensor layer stays a plain Module with `Tensor forward(const Tensor&) override`. A
// multi-input layer whose forward can be called with one tensor (the others defaulted) also
// works where a plain Module is expected (nn::Sequential, checkpoint_sequential, Module&): a
// one-tensor call reaches it through forward_from_one_tensor() below.
#include <concepts>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "nn/module.h"

namespace ember::nn {

namespace call_args {

template <class T>
constexpr bool is_tensor = std::is_same_v<std::remove_cvref_t<T>, Tensor>;

// Moves each tensor argument out into `tensors`, leaving an undefined Tensor in its place, so a
// kept copy of the arguments holds no tensor alive.
template <class T>
void take_tensor(T& arg, Module::Tensors& tensors) {
  if constexpr (is_tensor<T>) tensors.push_back(std::exchange(arg, Tensor()));
}

template <class T>
void put_tensor(T& arg, const Module::Tensors& tensors, size_t& next) {
  if constexpr (is_tensor<T>) arg = tensors[next++];
}

template <class T>
struct Results;  // how forward's return type becomes a list of tensors and back

template <>
struct Results<Tensor> {
  static Module::Tensors flatten(Tensor r) { return {std::move(r)}; }
  static Tensor rebuild(Module::Tensors t) { return std::move(t[0]); }
};

template <>
struct Results<Module::Tensors> {
  static Module::Tensors flatten(Module::Tensors r) { return r; }
  static Module::Tensors rebuild(Module::Tensors t) { return t; }
};

template <class... T>
  requires(is_tensor<T> && ...)
struct Results<std::tuple<T...>> {
  static Module::Tensors flatten(std::tuple<T...> r) {
    return std::apply([](auto&... t) { return Module::Tensors{std::move(t)...}; }, r);
  }
  static std::tuple<T...> rebuild(Module::Tensors t) {
    return [&]<size_t... I>(std::index_sequence<I...>) { return std::tuple<T...>(std::move(t[I])...); }(
        std::index_sequence_for<T...>{});
  }
};

template <>
struct Results<std::pair<Tensor, Tensor>> {
  static Module::Tensors flatten(std::pair<Tensor, Tensor> r) { return {std::move(r.first), std::move(r.second)}; }
  static std::pair<Tensor, Tensor> rebuild(Module::Tensors t) { return {std::move(t[0]), std::move(t[1])}; }
};

}  // namespace call_args

template <class Derived>
class MultiInputModule : public Module {
 public:
  template <class... Args>
  auto operator()(Args&&... args) {
    Derived& self = static_cast<Derived&>(*this);
    using Result = std::remove_cvref_t<decltype(self.forward(std::forward<Args>(args)...))>;
    static_assert(requires(Result r) { call_args::Results<Result>::flatten(std::move(r)); },
                  "MultiInputModule: forward() must return Tensor, std::pair<Tensor, Tensor>, std::tuple of "
                  "Tensors or std::vector<Tensor>");
    using Held = std::tuple<std::decay_t<Args>...>;
    static_assert(std::copy_constructible<Held>,
                  "MultiInputModule: forward()'s arguments must be copyable (a checkpoint runs it again)");
    Held held(std::forward<Args>(args)...);
    Tensors inputs;
    std::apply([&](auto&... a) { (call_args::take_tensor(a, inputs), ...); }, held);
    ForwardFn run = [&self, held = std::move(held)](const Tensors& in) {
      Held args = held;
      size_t next = 0;
      std::apply([&](auto&... a) { (call_args::put_tensor(a, in, next), ...); }, args);
      return call_args::Results<Result>::flatten(std::apply([&](auto&... a) { return self.forward(a...); }, args));
    };
    return call_args::Results<Result>::rebuild(call(std::move(inputs), run));
  }

 private:
  // Module's virtual one-tensor forward(const Tensor&) is hidden by the layer's own forward(),
  // whatever its signature, and compilers warn about that (-Woverloaded-virtual) where the
  // hiding is a mistake. Here it is the design: this deleted overload hides it first, once, and
  // Module's one-tensor calls reach the layer's forward through forward_from_one_tensor().
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverloaded-virtual"
  void forward() = delete;
#pragma GCC diagnostic pop

  Tensor forward_from_one_tensor(const Tensor& x) override {
    Derived& self = static_cast<Derived&>(*this);
    if constexpr (requires { { self.forward(x) } -> std::convertible_to<Tensor>; }) {
      return self.forward(x);
    } else {
      EMBER_FAIL("[", name(), "] forward() takes more than one tensor: call the module with all of them");
    }
  }
};

}  // namespace ember::nn
