// fmt's compiled part (what libfmt.so holds), built once into gpukit_base so that no program of
// the project needs libfmt.so at run time. gpurun and gpurun-rank start in every launch and every
// rank, and they carry their C++ runtime (-static-libstdc++, launcher/CMakeLists.txt): a shared
// libfmt would bring the shared libstdc++ back, with its start-up cost and a second copy of the
// runtime. format-inl.h defines fmt's functions; the templates that format.h declares `extern` are
// instantiated here, once for the whole project (fmt 8 to 11 declare the same ones).
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;

} // namespace detail
FMT_END_NAMESPACE
