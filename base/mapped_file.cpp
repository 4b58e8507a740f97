#include "base/mapped_file.hpp"

#include <array>
#include <cerrno>
#include <csignal>
#include <mutex>
#include <sys/mman.h>
#include <unistd.h>

namespace base {

namespace {

// The windows mapped now, for the SIGBUS handler (which may only read atomics). `begin` is 0
// for a free slot and 1 while a slot is being filled.
struct Slot {
    std::atomic<std::uintptr_t> begin{0};
    std::atomic<std::uintptr_t> end{0};
};
std::array<Slot, 64> g_slots;
std::atomic<std::uint64_t> g_pages_lost{0};
std::uintptr_t g_page_size = 4096;
struct sigaction g_previous { };
std::once_flag g_installed;

void pass_on(int sig, siginfo_t* info, void* context)
{
    if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
        g_previous.sa_sigaction(sig, info, context);
        return;
    }
    if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
        g_previous.sa_handler(sig);
        return;
    }
    // The default action: a fault repeats once this handler returns; a sent signal is sent again.
    signal(sig, SIG_DFL);
    if (info->si_code <= 0) {
        raise(sig);
    }
}

void on_sigbus(int sig, siginfo_t* info, void* context)
{
    const auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    if (info->si_code > 0) {
        for (const Slot& slot : g_slots) {
            const std::uintptr_t begin = slot.begin.load(std::memory_order_acquire);
            const std::uintptr_t end = slot.end.load(std::memory_order_acquire);
            if (begin > 1 && address >= begin && address < end) {
                // The file shrank: the rest of the window becomes zeros.
                const std::uintptr_t page = address & ~(g_page_size - 1);
                void* zeros = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
                if (zeros != MAP_FAILED) {
                    g_pages_lost.fetch_add(1, std::memory_order_relaxed);
                    return;
                }
            }
        }
    }
    pass_on(sig, info, context);
}

void install()
{
    g_page_size = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction action { };
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
}

} // namespace

bool MappedWindow::map(int fd, std::uint64_t offset, std::size_t size)
{
    unmap();
    std::call_once(g_installed, install);
    if (size == 0) {
        m_data = "";
        return true;
    }
    const std::uint64_t start = offset & ~static_cast<std::uint64_t>(g_page_size - 1);
    const std::size_t lead = static_cast<std::size_t>(offset - start);
    int slot = -1;
    for (std::size_t i = 0; i < g_slots.size() && slot < 0; ++i) {
        std::uintptr_t free = 0;
        if (g_slots[i].begin.compare_exchange_strong(free, 1)) {
            slot = static_cast<int>(i);
        }
    }
    if (slot < 0) {
        errno = EMFILE; // too many windows at once to guard
        return false;
    }
    void* mapped = mmap(nullptr, size + lead, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, static_cast<off_t>(start));
    if (mapped == MAP_FAILED) {
        g_slots[static_cast<std::size_t>(slot)].begin.store(0, std::memory_order_release);
        return false;
    }
    m_map = mapped;
    m_map_size = size + lead;
    m_data = static_cast<const char*>(mapped) + lead;
    m_size = size;
    m_slot = slot;
    Slot& s = g_slots[static_cast<std::size_t>(slot)];
    s.end.store(reinterpret_cast<std::uintptr_t>(mapped) + m_map_size, std::memory_order_release);
    s.begin.store(reinterpret_cast<std::uintptr_t>(mapped), std::memory_order_release);
    return true;
}

void MappedWindow::unmap()
{
    if (m_slot >= 0) {
        Slot& s = g_slots[static_cast<std::size_t>(m_slot)];
        s.begin.store(1, std::memory_order_release);
        s.end.store(0, std::memory_order_release);
        s.begin.store(0, std::memory_order_release);
        m_slot = -1;
    }
    if (m_map != nullptr) {
        munmap(m_map, m_map_size);
        m_map = nullptr;
    }
    m_map_size = 0;
    m_data = nullptr;
    m_size = 0;
}

std::uint64_t MappedWindow::pages_lost()
{
    return g_pages_lost.load(std::memory_order_relaxed);
}

} // namespace base
